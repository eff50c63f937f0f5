// StreamConsole front end: a prompt box, Send and Stop, the streamed answer, tool calls and usage.
// It only reads traits and sends {type: "send" | "stop"}; the kernel holds the key and the connection.

const CSS = `
.gwlab-sc { font-family: var(--jp-ui-font-family, sans-serif); font-size: 13px; max-width: 820px;
  border: 1px solid var(--jp-border-color2, #ddd); border-radius: 6px; padding: 8px; }
.gwlab-sc textarea { width: 100%; box-sizing: border-box; min-height: 3.2em; font: inherit; }
.gwlab-sc .row { display: flex; gap: 6px; align-items: center; margin: 6px 0; flex-wrap: wrap; }
.gwlab-sc .meta { color: var(--jp-ui-font-color2, #666); }
.gwlab-sc .answer { white-space: pre-wrap; min-height: 1.5em; padding: 6px;
  background: var(--jp-layout-color2, #f6f6f6); border-radius: 4px; }
.gwlab-sc .badge { padding: 1px 6px; border-radius: 8px; font-size: 11px; background: #e0e0e0; }
.gwlab-sc .badge.completed { background: #d4edda; } .gwlab-sc .badge.streaming { background: #d6e9f8; }
.gwlab-sc .badge.bad { background: #fde2c8; }
.gwlab-sc .incomplete { color: #a0522d; font-weight: 600; }
.gwlab-sc .error { color: #b00020; white-space: pre-wrap; }
.gwlab-sc .turn { border-left: 3px solid var(--jp-border-color2, #ddd); padding-left: 6px; margin: 4px 0; }
.gwlab-sc code { font-family: var(--jp-code-font-family, monospace); }
`;

// every ending but "completed" (gwlab/wire/endings.py); "incomplete" is kept for turns saved before "capped"
const ENDED_BADLY = new Set(["capped", "filtered", "refused", "other", "stopped", "interrupted", "incomplete",
  "failed", "error"]);

function usageText(usage) {
  if (!usage || usage.input_tokens === undefined) return "usage: n/a";
  return `usage: ${usage.input_tokens} in / ${usage.output_tokens ?? "?"} out tokens`;
}

function incompleteNote(status) {
  const why = { capped: "cut at the token limit", filtered: "content filter", refused: "the model refused",
    other: "ended for another reason", stopped: "stopped", interrupted: "connection cut",
    incomplete: "token limit or filter", failed: "the gateway reported an error", error: "no answer" }[status];
  return h("div", { class: "incomplete", "data-role": "incomplete" }, `⚠ incomplete answer (${why})`);
}

function toolList(calls) {
  if (!calls || !calls.length) return null;
  return h("div", { "data-role": "tool-calls" },
    ...calls.map((c) => h("div", {}, "tool call: ", h("code", {}, `${c.name}(${c.arguments})`))));
}

export default {
  render({ model, el }) {
    if (!document.getElementById("gwlab-sc-style")) {
      document.head.append(h("style", { id: "gwlab-sc-style" }, CSS));
    }
    const prompt = h("textarea", { placeholder: "Prompt (Ctrl+Enter sends)", "data-role": "prompt" });
    const send = h("button", { "data-role": "send", class: "jupyter-button" }, "Send");
    const stop = h("button", { "data-role": "stop", class: "jupyter-button" }, "Stop");
    const badge = h("span", { class: "badge", "data-role": "status" });
    const meta = h("span", { class: "meta" });
    const history = h("div", { "data-role": "turns" });
    const answer = h("div", { class: "answer", "data-role": "answer" });
    const footer = h("div", {});
    el.append(h("div", { class: "gwlab-sc" }, history,
      prompt, h("div", { class: "row" }, send, stop, badge, meta), answer, footer));

    const submit = () => {
      model.set("prompt", prompt.value);
      model.save_changes();
      model.send({ type: "send", prompt: prompt.value });
    };
    send.addEventListener("click", submit);
    stop.addEventListener("click", () => model.send({ type: "stop" }));
    prompt.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) submit(); });

    const draw = () => {
      const status = model.get("status");
      const busy = status === "streaming";
      if (document.activeElement !== prompt && prompt.value !== model.get("prompt")) prompt.value = model.get("prompt");
      send.disabled = busy;
      stop.disabled = !busy;
      badge.textContent = status;
      badge.className = `badge ${status}${ENDED_BADLY.has(status) ? " bad" : ""}`;
      meta.textContent = `${model.get("protocol")} · ${model.get("model")}`;
      answer.textContent = model.get("text");
      const error = model.get("error");
      footer.replaceChildren(...[
        ENDED_BADLY.has(status) ? incompleteNote(status) : null,
        toolList(model.get("tool_calls")),
        status !== "idle" ? h("div", { class: "meta", "data-role": "usage" }, usageText(model.get("usage"))) : null,
        error ? h("div", { class: "error", "data-role": "error" }, error) : null,
      ].filter(Boolean));
      history.replaceChildren(...model.get("turns").map((t) => h("div", { class: "turn" },
        h("div", { class: "meta" }, `› ${t.prompt}`),
        h("div", {}, t.text), t.complete ? null : incompleteNote(t.status), toolList(t.tool_calls))));
    };
    const names = ["status", "text", "error", "tool_calls", "usage", "turns", "prompt", "model", "protocol"];
    for (const name of names) model.on(`change:${name}`, draw);
    draw();
    return () => { for (const name of names) model.off(`change:${name}`, draw); };
  },
};
