// What every console's front end shares, prepended to each widget's own module (widgets/_esm.py).

// h("div", {class: "x", onclick: fn}, child, ...): an element, its attributes and listeners, its children
function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}
