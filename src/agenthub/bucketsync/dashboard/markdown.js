// Markdown for message bodies, built as DOM nodes from an allowlist: paragraphs, line
// breaks, headings, lists, fenced and inline code, **bold**, *em* and http(s) links.
// Everything else, raw HTML included, stays text: the output never passes through
// innerHTML, so a message cannot inject markup or script.

const INLINE = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\n]+\*)|(\[[^\]\n]+\]\((https?:\/\/[^)\s]+)\))/g;

function inline(text) {
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
    const [whole, code, bold, em, link, href] = match;
    let node;
    if (code) { node = document.createElement("code"); node.textContent = code.slice(1, -1); }
    else if (bold) { node = document.createElement("strong"); node.append(...inline(bold.slice(2, -2))); }
    else if (em) { node = document.createElement("em"); node.append(...inline(em.slice(1, -1))); }
    else if (link) {
      node = document.createElement("a");
      node.href = href;
      node.rel = "noopener noreferrer nofollow";
      node.target = "_blank";
      node.textContent = link.slice(1, link.indexOf("]("));
    }
    nodes.push(node);
    last = match.index + whole.length;
  }
  if (last < text.length) nodes.push(document.createTextNode(text.slice(last)));
  return nodes;
}

function withBreaks(lines) {
  const nodes = [];
  lines.forEach((line, i) => {
    if (i) nodes.push(document.createElement("br"));
    nodes.push(...inline(line));
  });
  return nodes;
}

export function renderMarkdown(source) {
  const root = document.createDocumentFragment();
  const lines = String(source).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (/^```/.test(line)) {
      const code = [];
      for (i += 1; i < lines.length && !/^```/.test(lines[i]); i += 1) code.push(lines[i]);
      i += 1;
      const pre = document.createElement("pre");
      const inner = document.createElement("code");
      inner.textContent = code.join("\n");
      pre.append(inner);
      root.append(pre);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      const h = document.createElement(`h${Math.min(6, heading[1].length + 3)}`);
      h.append(...inline(heading[2]));
      root.append(h);
      i += 1;
      continue;
    }
    const item = /^\s*([-*]|\d+\.)\s+/;
    if (item.test(line)) {
      const ordered = /^\s*\d+\./.test(line);
      const list = document.createElement(ordered ? "ol" : "ul");
      for (; i < lines.length && item.test(lines[i]); i += 1) {
        const li = document.createElement("li");
        li.append(...inline(lines[i].replace(item, "")));
        list.append(li);
      }
      root.append(list);
      continue;
    }
    if (!line.trim()) { i += 1; continue; }
    const para = [];
    for (; i < lines.length && lines[i].trim() && !/^```/.test(lines[i]) && !/^#{1,6}\s/.test(lines[i]) && !item.test(lines[i]); i += 1) {
      para.push(lines[i]);
    }
    const p = document.createElement("p");
    p.append(...withBreaks(para));
    root.append(p);
  }
  return root;
}
