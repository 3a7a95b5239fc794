// SPDX-License-Identifier: MIT
// Markdown for the chat page: the model's replies rendered as headings, paragraphs, lists, quotes,
// tables, code blocks, inline code, emphasis and links, built as DOM nodes with createElement and
// text nodes only. No string from the model is ever parsed as HTML, so no markup in it can become
// an element or an attribute: a script or image tag with an event handler written in a reply is
// shown as the text it is, and no sanitizer is needed. We chose this over a vendored library (marked + DOMPurify)
// because a library that builds an HTML string and cleans it afterwards is safe only as long as
// the sanitizer and its configuration stay right, while this renderer has no path from model
// text to markup at all; it is also small enough to read whole, needs no update script, and keeps
// the page one file with nothing vendored. Links are made only for http:, https: and mailto:
// URLs (never javascript: or data:), open in a new tab with rel="noopener noreferrer", and an
// image is shown as a link to it (the page's Content-Security-Policy loads no images anyway).
// Bounds keep hostile input cheap: nesting stops at kMaxDepth, and a block too long to be worth
// parsing inline is shown as plain text.
"use strict";

const markdown = (() => {
  const kMaxDepth = 8;
  const kMaxInline = 20000;

  const el = (tag, className) => {
    const node = document.createElement(tag);
    if (className) node.className = className;
    return node;
  };

  // The URL as a link may have it, or null: only absolute http(s) and mailto URLs are allowed.
  function safeUrl(text) {
    if (!/^(https?:|mailto:)/i.test(text.trim())) return null;
    try {
      const url = new URL(text.trim());
      return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
    } catch (e) {
      return null;
    }
  }

  function link(url, className) {
    const a = el("a", className);
    a.setAttribute("href", url);
    a.target = "_blank";
    a.rel = "noopener noreferrer";
    return a;
  }

  // The index where a run of `delimiter` closes emphasis opened before `from`, or -1. The text
  // inside may not start or end with a space, so "a * b * c" stays as it is. Whether a run can
  // close does not depend on where the emphasis opened, so a search that found none from some
  // position is remembered in `failed` (delimiter -> position) and not repeated from later ones,
  // which keeps a line of many unmatched delimiters linear.
  function closing(text, delimiter, from, failed) {
    if (from >= text.length || /\s/.test(text[from])) return -1;
    if (failed.has(delimiter) && failed.get(delimiter) <= from) return -1;
    let at = from;
    for (;;) {
      at = text.indexOf(delimiter, at + 1);
      if (at < 0) {
        failed.set(delimiter, from);
        return -1;
      }
      if (/\s/.test(text[at - 1]) || text[at - 1] === "\\") continue;
      // "_" inside a word (snake_case) neither opens nor closes emphasis.
      if (delimiter[0] === "_" && /\w/.test(text[at + delimiter.length] || "")) continue;
      return at;
    }
  }

  // For each "[" of text, the index of the "]" that closes it (escaped brackets skipped), found in
  // one pass rather than a scan from every "[".
  function bracketPairs(text) {
    const pairs = new Map(), open = [];
    for (let i = 0; i < text.length; ++i) {
      if (text[i] === "\\") ++i;
      else if (text[i] === "[") open.push(i);
      else if (text[i] === "]" && open.length) pairs.set(open.pop(), i);
    }
    return pairs;
  }

  // The match of a sticky regex at `at` of text, or null.
  function sticky(regex, text, at) {
    regex.lastIndex = at;
    return regex.exec(text);
  }

  // [label](url "title"): the end index, label and URL, or null.
  function parseLink(text, open, pairs) {
    const close = pairs.has(open) ? pairs.get(open) : -1;
    if (close < 0 || text[close + 1] !== "(") return null;
    const target = /^\(\s*(<[^<>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+("[^"]*"|'[^']*'))?\s*\)/.exec(
        text.slice(close + 1));
    if (!target) return null;
    const url = target[1].startsWith("<") ? target[1].slice(1, -1) : target[1];
    return { end: close + 1 + target[0].length, label: text.slice(open + 1, close), url };
  }

  // Appends the inline content of text (code spans, links, emphasis, line breaks) to parent.
  function inline(text, parent, depth) {
    if (depth > kMaxDepth || text.length > kMaxInline) {
      parent.append(text);
      return;
    }
    let plain = "", pairs = null;
    const failed = new Map();
    const flush = () => {
      if (plain) parent.append(plain);
      plain = "";
    };
    for (let i = 0; i < text.length;) {
      const c = text[i];
      if (c === "\\" && /[!-\/:-@\[-`{-~]/.test(text[i + 1] || "")) {
        plain += text[i + 1];
        i += 2;
        continue;
      }
      if (c === "\n") {
        flush();
        parent.append(el("br"));
        ++i;
        continue;
      }
      if (c === "`") {
        const run = sticky(/`+/y, text, i)[0];
        const end = failed.get(run) <= i ? -1 : text.indexOf(run, i + run.length);
        if (end < 0) failed.set(run, i);
        if (end >= 0) {
          flush();
          const code = el("code");
          code.textContent = text.slice(i + run.length, end).replace(/\n/g, " ");
          parent.append(code);
          i = end + run.length;
        } else {
          plain += run;
          i += run.length;
        }
        continue;
      }
      if (c === "[" || (c === "!" && text[i + 1] === "[")) {
        const image = c === "!";
        if (!pairs) pairs = bracketPairs(text);
        const parsed = parseLink(text, image ? i + 1 : i, pairs);
        if (parsed) {
          flush();
          const url = safeUrl(parsed.url);
          const target = url ? link(url, image ? "image-link" : "") : el("span", "unsafe-link");
          if (image) target.append(parsed.label || "image");
          else inline(parsed.label, target, depth + 1);
          parent.append(target);
          i = parsed.end;
          continue;
        }
      }
      if (c === "<") {
        const auto = sticky(/<((?:https?|mailto):[^\s<>]+)>/iy, text, i);
        if (auto && safeUrl(auto[1])) {
          flush();
          const a = link(safeUrl(auto[1]));
          a.textContent = auto[1];
          parent.append(a);
          i += auto[0].length;
          continue;
        }
      }
      if ((c === "h" || c === "H") && !/\w/.test(text[i - 1] || "")) {
        const bare = sticky(/https?:\/\/[^\s<>]*[^\s<>.,;:!?'")\]*_~]/iy, text, i);
        if (bare && safeUrl(bare[0])) {
          flush();
          const a = link(safeUrl(bare[0]));
          a.textContent = bare[0];
          parent.append(a);
          i += bare[0].length;
          continue;
        }
      }
      const emphasis = sticky(/\*\*|__|~~|\*|_/y, text, i);
      if (emphasis && !(emphasis[0][0] === "_" && /\w/.test(text[i - 1] || ""))) {
        const delimiter = emphasis[0];
        const end = closing(text, delimiter, i + delimiter.length, failed);
        if (end > i + delimiter.length) {
          flush();
          const tag = delimiter === "~~" ? "del" : delimiter.length === 2 ? "strong" : "em";
          const node = el(tag);
          inline(text.slice(i + delimiter.length, end), node, depth + 1);
          parent.append(node);
          i = end + delimiter.length;
          continue;
        }
      }
      plain += c;
      ++i;
    }
    flush();
  }

  const fence = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/;
  const heading = /^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$/;
  const rule = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
  const listItem = /^( *)([-*+]|\d{1,9}[.)])(\s+|$)/;
  const quote = /^ {0,3}> ?/;
  const tableSeparator = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

  const startsBlock = (line) =>
    fence.test(line) || heading.test(line) || rule.test(line) || listItem.test(line) || quote.test(line);

  // A table row's cells: split at each "|" that is not escaped ("\\|" is a "|" in the cell).
  function cells(line) {
    let row = line.trim();
    if (row.startsWith("|")) row = row.slice(1);
    if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
    const result = [];
    let cell = "";
    for (let i = 0; i < row.length; ++i) {
      if (row[i] === "\\" && row[i + 1] === "|") {
        cell += "|";
        ++i;
      } else if (row[i] === "|") {
        result.push(cell.trim());
        cell = "";
      } else {
        cell += row[i];
      }
    }
    result.push(cell.trim());
    return result;
  }

  const indentOf = (line) => /^ */.exec(line)[0].length;

  // The index of the first line from `from` on that is not blank, or lines.length.
  function nextNonBlank(lines, from) {
    let i = from;
    while (i < lines.length && lines[i].trim() === "") ++i;
    return i;
  }

  // A list starting at lines[start]: its element and the index after it. An item holds the lines
  // indented past its marker (and blank lines between them); items of one list share the marker
  // kind and indent. A run of blank lines is looked past once, so many of them stay linear.
  function list(lines, start, parent, depth) {
    const first = listItem.exec(lines[start]);
    const ordered = /\d/.test(first[2]);
    const node = el(ordered ? "ol" : "ul");
    if (ordered && parseInt(first[2], 10) !== 1) node.start = parseInt(first[2], 10);
    const baseIndent = first[1].length;
    let i = start;
    while (i < lines.length) {
      const match = listItem.exec(lines[i]);
      if (!match || match[1].length !== baseIndent || /\d/.test(match[2]) !== ordered) break;
      const contentIndent = match[0].length;
      const body = [lines[i].slice(contentIndent)];
      let j = i + 1;
      while (j < lines.length) {
        const line = lines[j];
        if (line.trim() === "") {
          const next = nextNonBlank(lines, j);
          if (next === lines.length || indentOf(lines[next]) <= baseIndent) break;
          body.push("");
          j = next;
          continue;
        } else if (indentOf(line) > baseIndent) {
          body.push(line.slice(Math.min(indentOf(line), contentIndent)));
        } else if (!startsBlock(line) && body[body.length - 1] !== "") {
          body.push(line);  // a lazy continuation of the item's paragraph
        } else {
          break;
        }
        ++j;
      }
      const item = el("li");
      blocks(body, item, depth + 1, true);
      node.append(item);
      i = j;
      const next = nextNonBlank(lines, i);
      const nextItem = next < lines.length && listItem.exec(lines[next]);
      if (nextItem && nextItem[1].length === baseIndent) i = next;
    }
    parent.append(node);
    return i;
  }

  // A table: a header row, the separator row, then rows while lines hold a "|". Rows are built
  // with createElement and append (insertRow and insertCell slow down with each row).
  function table(lines, start, parent, depth) {
    const row = (line, cellTag) => {
      const tr = el("tr");
      for (const cell of cells(line)) {
        const node = el(cellTag);
        inline(cell, node, depth + 1);
        tr.append(node);
      }
      return tr;
    };
    const node = el("table");
    const head = el("thead");
    head.append(row(lines[start], "th"));
    const body = el("tbody");
    let i = start + 2;
    for (; i < lines.length && lines[i].includes("|") && lines[i].trim() !== ""; ++i) body.append(row(lines[i], "td"));
    node.append(head, body);
    const wrapper = el("div", "table-wrap");
    wrapper.append(node);
    parent.append(wrapper);
    return i;
  }

  // Appends the blocks of lines to parent. `tight` (a list item's content) puts a lone paragraph's
  // text straight into the item, as a list without blank lines between items reads.
  function blocks(lines, parent, depth, tight) {
    if (depth > kMaxDepth) {
      parent.append(lines.join("\n"));
      return;
    }
    const paragraphs = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let match;
      if (line.trim() === "") {
        ++i;
      } else if ((match = fence.exec(line))) {
        const marker = match[1];
        const code = [];
        for (++i; i < lines.length; ++i) {
          const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(lines[i]);
          if (close && close[1][0] === marker[0] && close[1].length >= marker.length) break;
          code.push(lines[i]);
        }
        ++i;  // the closing fence; a reply still streaming may not have one yet
        const pre = el("pre");
        const codeNode = el("code");
        if (match[2]) codeNode.dataset.language = match[2];
        codeNode.textContent = code.join("\n");
        pre.append(codeNode);
        parent.append(pre);
      } else if ((match = heading.exec(line))) {
        const node = el("h" + match[1].length);
        inline(match[2] || "", node, depth);
        parent.append(node);
        ++i;
      } else if (rule.test(line)) {
        parent.append(el("hr"));
        ++i;
      } else if (listItem.test(line) && !(listItem.exec(line)[3] === "" && paragraphs.length)) {
        i = list(lines, i, parent, depth);
      } else if (quote.test(line)) {
        const inner = [];
        for (; i < lines.length && lines[i].trim() !== ""; ++i) inner.push(lines[i].replace(quote, ""));
        const node = el("blockquote");
        blocks(inner, node, depth + 1, false);
        parent.append(node);
      } else if (line.includes("|") && i + 1 < lines.length && tableSeparator.test(lines[i + 1]) &&
                 lines[i + 1].includes("-")) {
        i = table(lines, i, parent, depth);
      } else {
        const text = [line.trim()];
        for (++i; i < lines.length && lines[i].trim() !== "" && !startsBlock(lines[i]); ++i) {
          if (lines[i].includes("|") && i + 1 < lines.length && tableSeparator.test(lines[i + 1])) break;
          text.push(lines[i].trim());
        }
        const node = el("p");
        inline(text.join("\n"), node, depth);
        parent.append(node);
        paragraphs.push(node);
      }
    }
    if (tight && paragraphs.length === 1 && parent.firstChild === paragraphs[0]) {
      paragraphs[0].replaceWith(...paragraphs[0].childNodes);
    }
  }

  return {
    // Replaces the children of `into` with the markdown text rendered.
    render(text, into) {
      const fragment = document.createDocumentFragment();
      blocks(text.replace(/\r\n?/g, "\n").split("\n"), fragment, 0, false);
      into.replaceChildren(fragment);
    },
    safeUrl,
  };
})();
