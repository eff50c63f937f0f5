// RealtimeConsole front end. The kernel holds the realtime connection and the key; this page only
// captures the microphone, plays what the kernel sends, and draws traits. Everything crosses as comm
// messages (binary buffers for audio), so it works with a remote kernel.
//   to the kernel:   audio (+ pcm16 buffer), played, ptt, text, connect, disconnect, mic,
//                    webrtc_token, rtc_event, rtc_state
//   from the kernel: audio (+ pcm16 buffer), interrupt, webrtc_token, rtc_send

const FRAME_SECONDS = 0.04; // microphone frames of 40 ms
const REPORT_SECONDS = 0.25; // playback progress reports

// AudioWorklet code, inlined and loaded from a Blob URL (one ESM file, nothing else to serve)
const WORKLETS = `
class Capture extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.size = options.processorOptions.frame;
    this.frame = new Int16Array(this.size);
    this.used = 0;
    this.enabled = true;
    this.port.onmessage = (e) => { this.enabled = e.data.enabled; if (!this.enabled) this.used = 0; };
  }
  process(inputs) {
    const input = inputs[0] && inputs[0][0];
    if (input && this.enabled) {
      for (let i = 0; i < input.length; i++) {
        const s = Math.max(-1, Math.min(1, input[i]));
        this.frame[this.used++] = s < 0 ? s * 0x8000 : s * 0x7fff;
        if (this.used === this.size) {
          this.port.postMessage(this.frame.buffer, [this.frame.buffer]);
          this.frame = new Int16Array(this.size);
          this.used = 0;
        }
      }
    }
    return true;
  }
}
registerProcessor("gwlab-capture", Capture);

class Player extends AudioWorkletProcessor {
  constructor() {
    super();
    this.queue = [];
    this.offset = 0;
    this.item = null; // the item last played: an underrun does not restart its count
    this.playing = false;
    this.played = 0;
    this.reported = 0;
    this.port.onmessage = (e) => {
      const m = e.data;
      if (m.type === "chunk") this.queue.push(m);
      else if (m.type === "stop") {
        this.port.postMessage({ type: "stopped", item: this.item, played: this.played });
        this.queue = []; this.offset = 0; this.item = null; this.playing = false; this.played = 0;
      }
    };
  }
  process(inputs, outputs) {
    const out = outputs[0][0];
    let i = 0;
    while (i < out.length && this.queue.length) {
      const chunk = this.queue[0];
      if (this.item !== chunk.item) {
        this.item = chunk.item; this.played = 0; this.reported = 0; this.playing = true;
        this.port.postMessage({ type: "start", item: this.item, played: 0 });
      }
      this.playing = true;
      const n = Math.min(out.length - i, chunk.samples.length - this.offset);
      out.set(chunk.samples.subarray(this.offset, this.offset + n), i);
      i += n; this.offset += n; this.played += n;
      if (this.offset >= chunk.samples.length) { this.queue.shift(); this.offset = 0; }
    }
    out.fill(0, i);
    if (this.playing) {
      if (!this.queue.length) {
        this.playing = false;
        this.port.postMessage({ type: "drained", item: this.item, played: this.played });
      } else if (this.played - this.reported >= sampleRate * ${REPORT_SECONDS}) {
        this.reported = this.played;
        this.port.postMessage({ type: "progress", item: this.item, played: this.played });
      }
    }
    return true;
  }
}
registerProcessor("gwlab-player", Player);
`;

const CSS = `
.gwlab-rt { font-family: var(--jp-ui-font-family, sans-serif); font-size: 13px; max-width: 980px;
  border: 1px solid var(--jp-border-color2, #ddd); border-radius: 6px; padding: 8px; }
.gwlab-rt .row { display: flex; gap: 8px; align-items: center; margin: 4px 0; flex-wrap: wrap; }
.gwlab-rt .meta { color: var(--jp-ui-font-color2, #666); }
.gwlab-rt .badge { padding: 1px 8px; border-radius: 8px; font-size: 11px; background: #e0e0e0; }
.gwlab-rt .badge.speaking { background: #d4edda; } .gwlab-rt .badge.listening { background: #d6e9f8; }
.gwlab-rt .badge.thinking { background: #fff3cd; } .gwlab-rt .badge.error { background: #f8d7da; }
.gwlab-rt .cols { display: flex; gap: 8px; } .gwlab-rt .cols > div { flex: 1; min-width: 0; }
.gwlab-rt .panel { border: 1px solid var(--jp-border-color3, #eee); border-radius: 4px; padding: 4px;
  height: 280px; overflow: auto; }
.gwlab-rt .line { margin: 3px 0; } .gwlab-rt .who { font-weight: 600; margin-right: 4px; }
.gwlab-rt .interrupted { color: #a0522d; } .gwlab-rt .pending { color: var(--jp-ui-font-color2, #888); }
.gwlab-rt .error { color: #b00020; white-space: pre-wrap; }
.gwlab-rt details { font-family: var(--jp-code-font-family, monospace); font-size: 11px; }
.gwlab-rt summary { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.gwlab-rt details pre { margin: 2px 0 4px 16px; white-space: pre-wrap; }
.gwlab-rt .client { color: #1565c0; } .gwlab-rt .server { color: #2e7d32; } .gwlab-rt .browser { color: #6a1b9a; }
.gwlab-rt input[type=range] { width: 110px; vertical-align: middle; }
.gwlab-rt button.held { background: #c8e6c9; }
`;

const MARKS = { client: "▲ client", server: "▼ server", browser: "● browser" };

function pcm16ToFloat(view, fromRate, toRate) {
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength).slice(); // aligned copy
  const pcm = new Int16Array(bytes.buffer, 0, bytes.byteLength >> 1);
  const samples = Float32Array.from(pcm, (s) => s / 32768);
  if (fromRate === toRate) return samples;
  const out = new Float32Array(Math.round((samples.length * toRate) / fromRate)); // linear: playback only
  for (let i = 0; i < out.length; i++) {
    const x = (i * fromRate) / toRate, j = Math.floor(x), f = x - j;
    out[i] = (samples[j] ?? 0) * (1 - f) + (samples[j + 1] ?? samples[j] ?? 0) * f;
  }
  return out;
}

// Microphone capture and playback on one AudioContext (24 kHz when the browser allows it).
class AudioPath {
  constructor(model, report) {
    this.model = model;
    this.report = report;
    this.ctx = null;
    this.lastPlayed = new Map();
  }

  async context() {
    if (!this.ctx) {
      try { this.ctx = new AudioContext({ sampleRate: 24000 }); } catch { this.ctx = new AudioContext(); }
      const url = URL.createObjectURL(new Blob([WORKLETS], { type: "text/javascript" }));
      try { await this.ctx.audioWorklet.addModule(url); } finally { URL.revokeObjectURL(url); }
      this.player = new AudioWorkletNode(this.ctx, "gwlab-player", { numberOfInputs: 0, outputChannelCount: [1] });
      this.player.connect(this.ctx.destination);
      this.player.port.onmessage = (e) => this.onPlayer(e.data);
    }
    if (this.ctx.state === "suspended") await this.ctx.resume();
    return this.ctx;
  }

  async startMic(enabled) {
    const ctx = await this.context();
    if (this.stream) return this.gate(enabled);
    this.stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 } });
    this.source = ctx.createMediaStreamSource(this.stream);
    this.capture = new AudioWorkletNode(ctx, "gwlab-capture",
      { processorOptions: { frame: Math.round(ctx.sampleRate * FRAME_SECONDS) } });
    this.capture.port.onmessage = (e) => this.model.send({ type: "audio", rate: ctx.sampleRate }, undefined, [e.data]);
    const mute = ctx.createGain(); // keeps the capture node pulled by the graph, silently
    mute.gain.value = 0;
    this.source.connect(this.capture).connect(mute).connect(ctx.destination);
    this.gate(enabled);
  }

  gate(enabled) { if (this.capture) this.capture.port.postMessage({ enabled }); }

  stopMic() {
    if (this.stream) for (const track of this.stream.getTracks()) track.stop();
    if (this.source) this.source.disconnect();
    if (this.capture) this.capture.disconnect();
    this.stream = this.source = this.capture = null;
  }

  get micOn() { return Boolean(this.stream); }

  async play(msg, view) {
    const ctx = await this.context();
    const samples = pcm16ToFloat(view, msg.rate, ctx.sampleRate);
    const item = `${msg.item_id}:${msg.content_index}`;
    this.player.port.postMessage({ type: "chunk", item, samples }, [samples.buffer]);
  }

  interrupt(msg) {
    this.pendingStop = `${msg.item_id}:${msg.content_index}`;
    if (this.player) this.player.port.postMessage({ type: "stop" });
    else this.onPlayer({ type: "stopped", item: null, played: 0 });
  }

  onPlayer(m) {
    let item = m.item;
    let ms = this.ctx ? (1000 * m.played) / this.ctx.sampleRate : 0;
    if (m.type === "stopped") { // the kernel asked: answer for its item, even if playback had ended
      item = this.pendingStop;
      if (m.item !== item) ms = this.lastPlayed.get(item) ?? 0;
      this.pendingStop = null;
    }
    if (!item) return;
    this.lastPlayed.set(item, ms);
    const [itemId, index] = [item.slice(0, item.lastIndexOf(":")), Number(item.slice(item.lastIndexOf(":") + 1))];
    this.report({ type: "played", item_id: itemId, content_index: index, ms, state: m.type });
  }

  close() {
    this.stopMic();
    if (this.ctx) this.ctx.close();
    this.ctx = null;
  }
}

// Browser-direct WebRTC: the kernel mints a one-minute ephemeral token; the key never comes here.
class DirectRtc {
  constructor(model, audioElement) { this.model = model; this.audio = audioElement; }

  async open(token, url) {
    const pc = (this.pc = new RTCPeerConnection());
    pc.ontrack = (e) => { this.audio.srcObject = e.streams[0] || new MediaStream([e.track]); this.audio.play().catch(() => {}); };
    this.stream = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: true } });
    for (const track of this.stream.getAudioTracks()) pc.addTrack(track, this.stream);
    const channel = (this.channel = pc.createDataChannel("oai-events"));
    channel.onopen = () => this.model.send({ type: "rtc_state", state: "open" });
    channel.onclose = () => this.model.send({ type: "rtc_state", state: "closed" });
    channel.onmessage = (e) => { try { this.model.send({ type: "rtc_event", event: JSON.parse(e.data) }); } catch { /* not JSON */ } };
    await pc.setLocalDescription(await pc.createOffer());
    await new Promise((resolve) => { // the whole offer at once: no trickle ICE
      if (pc.iceGatheringState === "complete") return resolve();
      pc.addEventListener("icegatheringstatechange", () => pc.iceGatheringState === "complete" && resolve());
      setTimeout(resolve, 3000);
    });
    const answer = await fetch(url, { method: "POST", body: pc.localDescription.sdp,
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/sdp" } });
    if (!answer.ok) throw new Error(`the gateway refused the offer: HTTP ${answer.status}`);
    await pc.setRemoteDescription({ type: "answer", sdp: await answer.text() });
  }

  send(event) { if (this.channel && this.channel.readyState === "open") this.channel.send(JSON.stringify(event)); }

  close() {
    if (this.stream) for (const track of this.stream.getTracks()) track.stop();
    if (this.pc) this.pc.close();
    this.pc = this.channel = this.stream = null;
  }
}

function slider(model, name, label, unit) {
  const [min, max, step] = model.get("vad_limits")[name];
  const input = h("input", { type: "range", min: String(min), max: String(max), step: String(step), "data-role": name });
  const value = h("span", { class: "meta" });
  const trait = `vad_${name}`;
  const show = () => { input.value = String(model.get(trait)); value.textContent = `${model.get(trait)}${unit}`; };
  input.addEventListener("change", () => { model.set(trait, Number(input.value)); model.save_changes(); });
  input.addEventListener("input", () => { value.textContent = `${input.value}${unit}`; });
  model.on(`change:${trait}`, show);
  show();
  return { node: h("label", { class: "meta" }, `${label} `, input, " ", value), off: () => model.off(`change:${trait}`, show) };
}

export default {
  render({ model, el }) {
    if (!document.getElementById("gwlab-rt-style")) document.head.append(h("style", { id: "gwlab-rt-style" }, CSS));
    const send = (msg) => model.send(msg);
    const audioPath = new AudioPath(model, send);
    const rtcAudio = h("audio", { autoplay: "" });
    const rtc = new DirectRtc(model, rtcAudio);

    const connect = h("button", { class: "jupyter-button", "data-role": "connect" });
    const mic = h("button", { class: "jupyter-button", "data-role": "mic" });
    const badge = h("span", { class: "badge", "data-role": "status" });
    const mode = h("select", { "data-role": "mode" }, h("option", { value: "vad" }, "server VAD"),
      h("option", { value: "ptt" }, "push-to-talk"));
    const transport = h("select", { "data-role": "transport" }, h("option", { value: "websocket" }, "via kernel"),
      h("option", { value: "webrtc" }, "WebRTC (direct)"));
    const talk = h("button", { class: "jupyter-button", "data-role": "talk" }, "Hold to talk");
    const sliders = [slider(model, "threshold", "threshold", ""),
      slider(model, "prefix_padding_ms", "prefix padding", " ms"),
      slider(model, "silence_duration_ms", "silence", " ms")];
    const vadRow = h("div", { class: "row" }, ...sliders.map((s) => s.node));
    const text = h("input", { type: "text", placeholder: "…or type a message", size: "50", "data-role": "text" });
    const say = h("button", { class: "jupyter-button", "data-role": "say" }, "Send");
    const transcript = h("div", { class: "panel", "data-role": "transcript" });
    const log = h("div", { class: "panel", "data-role": "events" });
    const usage = h("div", { class: "meta", "data-role": "usage" });
    const error = h("div", { class: "error", "data-role": "error" });
    el.append(h("div", { class: "gwlab-rt" },
      h("div", { class: "row" }, connect, mic, badge, mode, transport, h("span", { class: "meta" }, model.get("model"))),
      vadRow, h("div", { class: "row" }, talk, text, say), error,
      h("div", { class: "cols" }, h("div", {}, h("b", {}, "Transcript"), transcript, usage),
        h("div", {}, h("b", {}, "Events (newest first)"), log)), rtcAudio));

    const reportMic = (p) => p.then(() => send({ type: "mic", state: "on" }))
      .catch((e) => send({ type: "mic", state: "error", error: String(e && e.message || e) }));
    const connected = () => !["disconnected", "error"].includes(model.get("status"));

    connect.addEventListener("click", async () => {
      if (connected()) {
        send({ type: "disconnect" });
        audioPath.stopMic();
        rtc.close();
        return;
      }
      send({ type: "connect" });
      if (model.get("transport") === "webrtc") send({ type: "webrtc_token" });
      else reportMic(audioPath.startMic(model.get("mode") === "vad"));
    });
    mic.addEventListener("click", () => {
      if (audioPath.micOn) { audioPath.stopMic(); send({ type: "mic", state: "off" }); draw(); }
      else reportMic(audioPath.startMic(model.get("mode") === "vad").then(draw));
    });
    const press = (down) => {
      if (down === talk.classList.contains("held")) return;
      talk.classList.toggle("held", down);
      audioPath.gate(down);
      send({ type: "ptt", state: down ? "down" : "up" });
    };
    talk.addEventListener("pointerdown", () => { reportMic(audioPath.startMic(true)); press(true); });
    talk.addEventListener("pointerup", () => press(false));
    talk.addEventListener("pointerleave", () => press(false));
    const sayText = () => { if (text.value.trim()) { send({ type: "text", text: text.value }); text.value = ""; } };
    say.addEventListener("click", sayText);
    text.addEventListener("keydown", (e) => { if (e.key === "Enter") sayText(); });
    for (const [select, trait] of [[mode, "mode"], [transport, "transport"]]) {
      select.addEventListener("change", () => { model.set(trait, select.value); model.save_changes(); });
    }

    const onMessage = async (msg, buffers) => {
      if (msg.type === "audio" && buffers && buffers.length) await audioPath.play(msg, buffers[0]);
      else if (msg.type === "interrupt") audioPath.interrupt(msg);
      else if (msg.type === "rtc_send") rtc.send(msg.event);
      else if (msg.type === "webrtc_token") {
        if (msg.error) return;
        try { await rtc.open(msg.token, msg.url); } // the token lives only in this call
        catch (e) { send({ type: "rtc_state", state: "failed", error: String(e && e.message || e) }); rtc.close(); }
      }
    };
    model.on("msg:custom", onMessage);

    const logLines = new Map(); // n -> <details>, kept so an expanded line stays open across updates
    const drawLog = () => {
      const seen = new Set();
      const nodes = model.get("events").map((e) => {
        seen.add(e.n);
        let node = logLines.get(e.n);
        if (!node) {
          node = h("details", { "data-type": e.type, "data-dir": e.dir }, h("summary", {}), h("pre", {}, e.json));
          logLines.set(e.n, node);
        }
        node.firstChild.replaceChildren(h("span", { class: e.dir }, MARKS[e.dir] ?? e.dir), ` ${e.type}`,
          e.count > 1 ? ` ×${e.count}` : "", h("span", { class: "meta" }, `  ${e.t}`));
        return node;
      });
      for (const n of [...logLines.keys()]) if (!seen.has(n)) logLines.delete(n);
      log.replaceChildren(...nodes);
    };
    const drawTranscript = () => {
      transcript.replaceChildren(...model.get("transcript").map((t) => h("div", { class: "line", "data-role": t.role },
        h("span", { class: "who" }, t.role === "user" ? "you:" : "model:"),
        h("span", { class: t.status === "in_progress" ? "pending" : "" }, t.text || (t.status === "in_progress" ? "…" : "")),
        t.status === "interrupted" ? h("span", { class: "interrupted" },
          ` ■ interrupted${t.heard_ms !== undefined && t.heard_ms !== null ? ` (heard ${t.heard_ms} ms)` : ""}`) : null,
        t.status === "incomplete" || t.status === "failed" ? h("span", { class: "interrupted" }, ` ⚠ ${t.status}`) : null)));
      transcript.scrollTop = transcript.scrollHeight;
      const u = model.get("usage");
      usage.textContent = u.responses ? `${u.responses} responses · ${u.input_tokens} in / ${u.output_tokens} out tokens` : "";
    };
    let wasConnected = connected();
    const draw = () => {
      const status = model.get("status");
      badge.textContent = status;
      badge.className = `badge ${status}`;
      connect.textContent = connected() ? "Disconnect" : "Connect";
      mic.textContent = audioPath.micOn ? "Stop mic" : "Start mic";
      mic.disabled = !connected() || model.get("transport") === "webrtc";
      mode.value = model.get("mode");
      transport.value = model.get("transport");
      const ptt = model.get("mode") === "ptt";
      talk.style.display = ptt ? "" : "none";
      vadRow.style.display = ptt ? "none" : "";
      error.textContent = model.get("error");
      const now = connected();
      if (wasConnected && !now) { rtc.close(); audioPath.stopMic(); } // a session that ended stops the mic
      wasConnected = now;
    };
    const traits = { events: drawLog, transcript: drawTranscript, usage: drawTranscript, status: draw, error: draw,
      mode: draw, transport: draw };
    for (const [name, fn] of Object.entries(traits)) model.on(`change:${name}`, fn);
    const gateByMode = () => audioPath.gate(model.get("mode") === "vad");
    model.on("change:mode", gateByMode);
    draw(); drawLog(); drawTranscript();
    return () => {
      for (const [name, fn] of Object.entries(traits)) model.off(`change:${name}`, fn);
      model.off("change:mode", gateByMode);
      model.off("msg:custom", onMessage);
      for (const s of sliders) s.off();
      audioPath.close();
      rtc.close();
    };
  },
};
