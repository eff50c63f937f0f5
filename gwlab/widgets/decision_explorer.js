// DecisionExplorer front end: state and questions editors, Run, probability bars, "copy as Python".
// Edits go to the kernel as traits (it validates them with the client's own checks); Run is a message.

const CSS = `
.gwlab-de { font-family: var(--jp-ui-font-family, sans-serif); font-size: 13px; max-width: 900px;
  border: 1px solid var(--jp-border-color2, #ddd); border-radius: 6px; padding: 8px; }
.gwlab-de .cols { display: flex; gap: 8px; } .gwlab-de .cols > div { flex: 1; min-width: 0; }
.gwlab-de textarea { width: 100%; box-sizing: border-box; font-family: var(--jp-code-font-family, monospace);
  font-size: 12px; }
.gwlab-de label { font-weight: 600; display: block; margin: 4px 0 2px; }
.gwlab-de .row { display: flex; gap: 8px; align-items: center; margin: 6px 0; }
.gwlab-de .error { color: #b00020; white-space: pre-wrap; }
.gwlab-de .meta { color: var(--jp-ui-font-color2, #666); }
.gwlab-de .q { margin: 8px 0; } .gwlab-de .q h4 { margin: 0 0 4px; font-size: 13px; }
.gwlab-de .bar { display: grid; grid-template-columns: 220px 1fr 52px; gap: 6px; align-items: center; margin: 2px 0; }
.gwlab-de .bar .label { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.gwlab-de .bar .track { background: var(--jp-layout-color2, #eee); height: 12px; border-radius: 3px; }
.gwlab-de .bar .fill { background: var(--jp-brand-color1, #1976d2); height: 12px; border-radius: 3px; }
.gwlab-de pre { background: var(--jp-layout-color2, #f6f6f6); padding: 6px; overflow: auto; max-height: 220px; }
`;

const pct = (p) => `${(100 * p).toFixed(1)}%`;

function answerView(a) {
  const head = `${a.id} (${a.type}): ${typeof a.value === "number" ? a.value.toFixed(3) : a.value ?? "–"}`
    + (a.confidence !== null && a.confidence !== undefined ? ` · confidence ${a.confidence.toFixed(2)}` : "");
  return h("div", { class: "q", "data-role": "answer" }, h("h4", {}, head),
    ...a.bars.map((b) => h("div", { class: "bar" }, h("span", { class: "label", title: b.label }, b.label),
      h("div", { class: "track" }, h("div", { class: "fill", style: `width: ${pct(b.p)}` })),
      h("span", {}, pct(b.p)))));
}

export default {
  render({ model, el }) {
    if (!document.getElementById("gwlab-de-style")) document.head.append(h("style", { id: "gwlab-de-style" }, CSS));
    const state = h("textarea", { rows: "10", "data-role": "state" });
    const questions = h("textarea", { rows: "10", "data-role": "questions" });
    const run = h("button", { class: "jupyter-button", "data-role": "run" }, "Run");
    const status = h("span", { class: "meta" });
    const error = h("div", { class: "error", "data-role": "error" });
    const answers = h("div", {});
    const python = h("pre", { "data-role": "python" });
    const copy = h("button", { class: "jupyter-button" }, "Copy as Python");
    el.append(h("div", { class: "gwlab-de" },
      h("div", { class: "cols" },
        h("div", {}, h("label", {}, "State (text, or a JSON object)"), state),
        h("div", {}, h("label", {}, "Questions (JSON)"), questions)),
      h("div", { class: "row" }, run, status), error, answers,
      h("details", {}, h("summary", {}, "Questions as Python"), copy, python)));

    const edit = (name, area) => area.addEventListener("input", () => { model.set(name, area.value); model.save_changes(); });
    edit("state", state);
    edit("questions_json", questions);
    run.addEventListener("click", () => model.send({ type: "run" }));
    copy.addEventListener("click", () => {
      const text = model.get("python");
      if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
      const range = document.createRange();  // also selected, for pages without clipboard access
      range.selectNodeContents(python);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
    });

    const draw = () => {
      if (document.activeElement !== state) state.value = model.get("state");
      if (document.activeElement !== questions) questions.value = model.get("questions_json");
      const err = model.get("error");
      error.textContent = err;
      run.disabled = model.get("status") === "running";
      const usage = model.get("usage");
      status.textContent = `${model.get("model")} · ${model.get("status")}`
        + (usage.input_tokens !== undefined ? ` · ${usage.input_tokens} input tokens` : "");
      answers.replaceChildren(...model.get("answers").map(answerView));
      python.textContent = model.get("python");
    };
    const names = ["state", "questions_json", "error", "status", "answers", "usage", "python", "model"];
    for (const name of names) model.on(`change:${name}`, draw);
    draw();
    return () => { for (const name of names) model.off(`change:${name}`, draw); };
  },
};
