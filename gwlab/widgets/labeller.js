// Labeller front end: the question, the row to label, one button per option (and its number key), the
// estimate so far. An answer is a message to the kernel, which stores it and sends the next row as traits.

const CSS = `
.gwlab-lb { font-family: var(--jp-ui-font-family, sans-serif); font-size: 13px; max-width: 900px;
  border: 1px solid var(--jp-border-color2, #ddd); border-radius: 6px; padding: 8px; outline: none; }
.gwlab-lb:focus { border-color: var(--jp-brand-color1, #1976d2); }
.gwlab-lb .question { font-weight: 600; margin: 2px 0 6px; }
.gwlab-lb .meta { color: var(--jp-ui-font-color2, #666); }
.gwlab-lb .text { white-space: pre-wrap; background: var(--jp-layout-color2, #f6f6f6); padding: 8px;
  border-radius: 4px; margin: 6px 0; max-height: 240px; overflow: auto; }
.gwlab-lb .options { display: flex; flex-wrap: wrap; gap: 6px; margin: 6px 0; }
.gwlab-lb .options button { max-width: 420px; text-align: left; height: auto; padding: 4px 8px; }
.gwlab-lb .options button.given { outline: 2px solid var(--jp-brand-color1, #1976d2); }
.gwlab-lb .options kbd { font-family: var(--jp-code-font-family, monospace); margin-right: 6px; }
.gwlab-lb .error { color: #b00020; white-space: pre-wrap; }
.gwlab-lb .estimate { margin: 2px 0; font-variant-numeric: tabular-nums; }
`;

export default {
  render({ model, el }) {
    if (!document.getElementById("gwlab-lb-style")) document.head.append(h("style", { id: "gwlab-lb-style" }, CSS));
    // tabindex: the panel takes the keyboard; data-lm-suppress-shortcuts: JupyterLab's own keys (1-7 make
    // a heading cell in command mode) stay out while it has focus
    const root = h("div", { class: "gwlab-lb", tabindex: "0", "data-lm-suppress-shortcuts": "true" });
    const question = h("div", { class: "question", "data-role": "question" });
    const progress = h("span", { class: "meta", "data-role": "progress" });
    const text = h("div", { class: "text", "data-role": "text" });
    const options = h("div", { class: "options", "data-role": "options" });
    const back = h("button", { class: "jupyter-button", "data-role": "back", title: "Backspace" }, "Back");
    const error = h("div", { class: "error", "data-role": "error" });
    const estimate = h("div", { "data-role": "estimates" });
    root.append(question, progress, text, options, h("div", {}, back), error, estimate);
    el.append(root);

    const answer = (key) => { model.send({ type: "answer", key, row: model.get("row") }); root.focus(); };
    back.addEventListener("click", () => { model.send({ type: "back" }); root.focus(); });
    root.addEventListener("keydown", (event) => {
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      const option = model.get("options").find((o) => o.hotkey && o.hotkey === event.key);
      if (option && model.get("row")) answer(option.key);
      else if (event.key === "Backspace" || event.key === "ArrowLeft") model.send({ type: "back" });
      else return;
      event.preventDefault();
      event.stopPropagation();
    });

    const draw = () => {
      question.textContent = model.get("question");
      const row = model.get("row");
      progress.textContent = row ? `row ${row} · ${model.get("done")} of ${model.get("total")} labelled`
        : `all ${model.get("total")} planned rows labelled`;
      text.textContent = model.get("text");
      text.style.display = row ? "" : "none";
      options.replaceChildren(...model.get("options").map((o) => h("button", {
        class: "jupyter-button" + (o.key === model.get("given") ? " given" : ""), "data-role": "option",
        "data-key": o.key, title: o.text, onclick: () => answer(o.key),
      }, o.hotkey ? h("kbd", {}, o.hotkey) : null, `${o.key}: ${o.text}`)));
      for (const button of options.children) button.disabled = !row;
      error.textContent = model.get("error");
      estimate.replaceChildren(...model.get("estimate").map((line) =>
        h("div", { class: "estimate", "data-role": "estimate" }, line.text)));
    };
    const names = ["question", "options", "row", "text", "given", "done", "total", "estimate", "error"];
    for (const name of names) model.on(`change:${name}`, draw);
    draw();
    return () => { for (const name of names) model.off(`change:${name}`, draw); };
  },
};
