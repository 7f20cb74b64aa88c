// Building DOM from data: text always goes in as text, never as HTML.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toISOString().replace("T", " ").slice(0, 19) + "Z";
}

export function number(value) {
  return value === null || value === undefined ? "—" : Number(value).toLocaleString("en-US");
}

// A table wider than its box says so: the wrapper gets `overflowing`, which shows a
// "scroll sideways" hint and an edge shadow (a phone cuts wide tables otherwise).
export function markOverflow(root) {
  for (const box of root.querySelectorAll(".scroll")) {
    box.classList.toggle("overflowing", box.scrollWidth > box.clientWidth + 1);
  }
}

export function table(headers, rows, attrs = {}) {
  return el("div", { class: "scroll" },
    el("table", attrs,
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
      el("tbody", {}, rows)));
}
