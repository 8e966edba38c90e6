// Generated from clients/typescript/src/index.ts by `npm run vendor` (tsc): do not edit; the client's tests fail when it differs.
// @switchboard/client: Switchboard's session protocol for TypeScript (Node and browsers).
export * from "./protocol.js";
export * from "./audio.js";
export * from "./session.js";
export * from "./browser.js";
export * from "./webrtc.js";
