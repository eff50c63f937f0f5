// UsageDashboard front end: summary, the newest ledger rows, and the plots PNG (a binary trait).

const CSS = `
.gwlab-ud { font-family: var(--jp-ui-font-family, sans-serif); font-size: 12px; max-width: 1000px;
  border: 1px solid var(--jp-border-color2, #ddd); border-radius: 6px; padding: 8px; }
.gwlab-ud .row { display: flex; gap: 8px; align-items: center; margin: 4px 0; flex-wrap: wrap; }
.gwlab-ud .meta { color: var(--jp-ui-font-color2, #666); }
.gwlab-ud .table { max-height: 260px; overflow: auto; }
.gwlab-ud table { border-collapse: collapse; width: 100%; }
.gwlab-ud th, .gwlab-ud td { padding: 2px 6px; border-bottom: 1px solid var(--jp-border-color3, #eee);
  text-align: left; white-space: nowrap; }
.gwlab-ud tr.bad td { background: #fff1e6; }
.gwlab-ud img { max-width: 100%; }
`;

const COLUMNS = [["time", "time (UTC)"], ["family", "family"], ["path", "path"], ["model", "model"],
  ["status", "status"], ["latency_ms", "ms"], ["input_tokens", "in"], ["output_tokens", "out"],
  ["ending", "ending"], ["run", "run"], ["error", "error"]];

const cell = (v) => (v === null || v === undefined ? "" : String(v));

export default {
  render({ model, el }) {
    if (!document.getElementById("gwlab-ud-style")) document.head.append(h("style", { id: "gwlab-ud-style" }, CSS));
    const summary = h("span", { "data-role": "summary" });
    const refresh = h("button", { class: "jupyter-button" }, "Refresh");
    const pause = h("button", { class: "jupyter-button", "data-role": "pause" });
    const updated = h("span", { class: "meta" });
    const body = h("tbody", {});
    const image = h("img", { alt: "usage over time and latency", "data-role": "plot" });
    el.append(h("div", { class: "gwlab-ud" }, h("div", { class: "row" }, summary, refresh, pause, updated),
      h("div", { class: "table" }, h("table", {},
        h("thead", {}, h("tr", {}, ...COLUMNS.map(([, title]) => h("th", {}, title)))), body)), image));
    refresh.addEventListener("click", () => model.send({ type: "refresh" }));
    pause.addEventListener("click", () => model.send({ type: model.get("paused") ? "resume" : "pause" }));

    let url = null;
    const drawPlot = () => {
      const png = model.get("plot");
      if (url) URL.revokeObjectURL(url);
      url = null;
      if (png && png.byteLength) {
        url = URL.createObjectURL(new Blob([png], { type: "image/png" }));
        image.src = url;
      }
      image.style.display = url ? "" : "none";
    };
    const draw = () => {
      const s = model.get("summary");
      summary.textContent = s.calls === undefined ? "no calls yet"
        : `${s.calls} call${s.calls === 1 ? "" : "s"} · ${s.input_tokens} in / ${s.output_tokens} out tokens · ${s.errors} errors · ${s.incomplete} incomplete`;
      pause.textContent = model.get("paused") ? "Resume" : "Pause";
      updated.textContent = model.get("updated") ? `updated ${model.get("updated")}` : "";
      body.replaceChildren(...model.get("rows").map((r) => h("tr", { class: r.error || (r.ending && r.ending !== "complete") ? "bad" : "" },
        ...COLUMNS.map(([name]) => h("td", {}, cell(name === "path" ? `${r.method} ${r.path}` : r[name]))))));
    };
    for (const name of ["rows", "summary", "paused", "updated"]) model.on(`change:${name}`, draw);
    model.on("change:plot", drawPlot);
    draw();
    drawPlot();
    return () => {
      for (const name of ["rows", "summary", "paused", "updated"]) model.off(`change:${name}`, draw);
      model.off("change:plot", drawPlot);
      if (url) URL.revokeObjectURL(url);
    };
  },
};
