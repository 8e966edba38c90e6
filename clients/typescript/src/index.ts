// @switchboard/client: Switchboard's session protocol for TypeScript (Node and browsers).
export * from "./protocol.js";
export * from "./audio.js";
export * from "./session.js";
export * from "./browser.js";
export * from "./webrtc.js";
