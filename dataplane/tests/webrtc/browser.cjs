// Headless Chromium as every WebRTC driver here launches it: no sandbox or background
// work, WebRTC on loopback allowed, media autoplaying; with `wav` the fake microphone plays
// that file once; with `secureOrigin` a page of that origin over plain HTTP counts as a
// secure context (the microphone needs one: the real node's gateway is reached so).
// (journey.cjs, run only on the real node, still launches its own, without a microphone.)
function launch(chromium, executablePath, { wav, secureOrigin } = {}) {
  const args = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--use-fake-ui-for-media-stream",
    "--autoplay-policy=no-user-gesture-required", "--allow-loopback-in-peer-connection"];
  if (wav) args.push("--use-fake-device-for-media-stream", `--use-file-for-fake-audio-capture=${wav}%noloop`);
  if (secureOrigin) args.push(`--unsafely-treat-insecure-origin-as-secure=${secureOrigin}`);
  return chromium.launch({ executablePath, headless: true, args });
}

module.exports = { launch };
