// torchhelp page: paste an error or drop a log, diagnose it through /v1/chat/completions, ask follow-ups.
//
// Safety: nothing the server (or an LLM behind it) returns is ever parsed as HTML. Every piece of
// text goes into the page through textContent / text nodes; the small Markdown renderer below only
// builds <p>, <ul>/<ol>, <h4>, <strong>, <em>, <code> and <pre> elements and never creates links.
// The API is stateless (like OpenAI's): the whole conversation is kept here in `state.messages`.
"use strict";

(() => {
  const MAX_BYTES = 4 * 1024 * 1024; // what the page sends at most (the server's own body limit is larger)
  const TOKEN_KEY = "torchhelp.token";
  const REQUEST_TIMEOUT_MS = 180000; // an upstream LLM can be slow; the server has its own timeout too
  const CHAT_URL = "v1/chat/completions"; // relative: works behind a reverse proxy that adds a prefix
  const MODEL = "torchhelp";

  const state = {
    messages: [], // [{role, content}] sent back with every follow-up
    diagnosis: null, // the `torchhelp` field of the first answer
    answer: "", // the first answer's Markdown (for "Copy answer as Markdown")
    busy: false,
    retry: null, // the request to repeat once a token has been entered after a 401
  };

  const $ = (id) => document.getElementById(id);

  // -- small DOM helpers (text only) ----------------------------------------------------------

  function el(tag, options, children) {
    const node = document.createElement(tag);
    if (options) {
      if (options.className) node.className = options.className;
      if (options.text !== undefined && options.text !== null) node.textContent = String(options.text);
      if (options.attrs) for (const [k, v] of Object.entries(options.attrs)) node.setAttribute(k, String(v));
    }
    if (children) for (const child of children) if (child) node.append(child);
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function mb(bytes) {
    return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
  }

  function setStatus(text, kind) {
    const status = $("status");
    status.textContent = text || "";
    status.className = kind ? `status ${kind}` : "status";
  }

  // -- token (sessionStorage: gone when the tab closes) ------------------------------------------

  function getToken() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch (_) {
      return "";
    }
  }

  function saveToken(value) {
    try {
      if (value) sessionStorage.setItem(TOKEN_KEY, value);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (_) {
      /* storage disabled: the token lives only in the input field */
    }
  }

  function currentToken() {
    return getToken() || $("token").value.trim();
  }

  function askForToken(message) {
    const box = $("token-box");
    box.open = true;
    setStatus(message, "error");
    $("token").focus();
  }

  // -- the API -----------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function serverMessage(data) {
    if (data && typeof data === "object") {
      const err = data.error;
      if (err && typeof err === "object" && typeof err.message === "string") return err.message;
      if (typeof err === "string") return err;
      if (typeof data.detail === "string") return data.detail;
    }
    return "";
  }

  async function postChat(messages) {
    const headers = { "Content-Type": "application/json", Accept: "application/json" };
    const token = currentToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
    let response;
    try {
      response = await fetch(CHAT_URL, {
        method: "POST",
        headers,
        body: JSON.stringify({ model: MODEL, messages, stream: false }),
        signal: controller.signal,
        credentials: "same-origin",
        cache: "no-store",
      });
    } catch (_) {
      throw new ApiError(0, controller.signal.aborted ? "timeout" : "network");
    } finally {
      clearTimeout(timer);
    }
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    if (!response.ok) throw new ApiError(response.status, serverMessage(data));
    const choice = data && Array.isArray(data.choices) ? data.choices[0] : null;
    if (!choice || !choice.message || typeof choice.message.content !== "string") {
      throw new ApiError(response.status, "the server's reply had no message");
    }
    return { content: choice.message.content, diagnosis: data.torchhelp || null };
  }

  function explain(err, retry) {
    if (!(err instanceof ApiError)) {
      setStatus(`Something went wrong in the page: ${err && err.message ? err.message : err}`, "error");
      return;
    }
    const detail = err.message ? ` (${err.message})` : "";
    switch (err.status) {
      case 0:
        setStatus(
          err.message === "timeout"
            ? `The server did not answer within ${REQUEST_TIMEOUT_MS / 1000} s. Try again, or paste a shorter text.`
            : "Could not reach the torchhelp server (network error). Is it still running?",
          "error",
        );
        return;
      case 401:
      case 403:
        state.retry = retry;
        askForToken(
          currentToken()
            ? "The server did not accept this access token. Enter the right one and press Save token."
            : "This server needs an access token: enter it under Access token and press Save token.",
        );
        return;
      case 413:
        setStatus("Too large for the server's request limit. Paste only the traceback or the end of the log.", "error");
        return;
      case 429:
        setStatus(`The server is busy${detail}. Try again in a moment.`, "error");
        return;
      case 503:
        setStatus(`The server is not ready${detail}. If it has just started it is still loading its knowledge index: try again in a few seconds.`, "error");
        return;
      case 504:
        setStatus(`The server took too long to answer${detail}. Try again.`, "error");
        return;
      default:
        setStatus(`The server answered with an error ${err.status}${detail}.`, "error");
    }
  }

  function setBusy(busy, label) {
    state.busy = busy;
    for (const id of ["submit", "ask", "clear"]) $(id).disabled = busy;
    document.querySelector("main").setAttribute("aria-busy", busy ? "true" : "false");
    if (busy) setStatus(label, "busy");
  }

  // -- copy buttons ------------------------------------------------------------------------------

  function legacyCopy(text) {
    // For pages served over plain http to another host (no secure context): execCommand on a
    // temporary textarea. The textarea is off-screen and removed right away.
    const area = el("textarea", { className: "offscreen", attrs: { readonly: "", "aria-hidden": "true", tabindex: "-1" } });
    area.value = text;
    document.body.append(area);
    area.select();
    let ok = false;
    try {
      ok = document.execCommand("copy");
    } catch (_) {
      ok = false;
    }
    area.remove();
    return ok;
  }

  async function copyText(text, button) {
    let ok = false;
    if (navigator.clipboard && window.isSecureContext) {
      try {
        await navigator.clipboard.writeText(text);
        ok = true;
      } catch (_) {
        ok = false; // permission refused: fall back below
      }
    }
    if (!ok) ok = legacyCopy(text);
    const original = button.dataset.label || button.textContent;
    button.dataset.label = original;
    button.textContent = ok ? "Copied" : "Copy failed: select the text and press Ctrl+C";
    button.focus();
    setTimeout(() => {
      button.textContent = original;
    }, 2000);
  }

  function codeBlock(code, label) {
    const button = el("button", { className: "copy", text: "Copy", attrs: { type: "button", "aria-label": label } });
    button.addEventListener("click", () => copyText(code, button));
    return el("div", { className: "code-block" }, [
      el("div", { className: "code-head" }, [button]),
      el("pre", null, [el("code", { text: code })]),
    ]);
  }

  // -- a tiny, safe Markdown renderer (text nodes only) -----------------------------------------

  const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*\n]+)\*\*|\[([^\]\n]+)\]\(([^)\s]+)\)|(?<![\w*])\*([^*\n]+)\*(?![\w*])/g;

  function inline(text, parent) {
    let last = 0;
    for (const m of text.matchAll(INLINE)) {
      if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
      if (m[1]) parent.append(el("code", { text: m[2].trim() }));
      else if (m[3]) parent.append(el("strong", { text: m[3] }));
      else if (m[4]) parent.append(document.createTextNode(`${m[4]} (${m[5]})`)); // links stay text
      else if (m[6]) parent.append(el("em", { text: m[6] }));
      last = m.index + m[0].length;
    }
    if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
    return parent;
  }

  const FENCE = /^(\s*)(`{3,}|~{3,})\s*([\w+.#-]*)\s*$/;
  const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
  const ITEM = /^(\s*)([-*+]|\d{1,3}[.)])\s+(.*)$/;

  function renderMarkdown(markdown) {
    const out = document.createDocumentFragment();
    const lines = String(markdown).replace(/\r\n?/g, "\n").split("\n");
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      const fence = FENCE.exec(line);
      if (fence) {
        const indent = fence[1].length;
        const marker = fence[2];
        const body = [];
        i += 1;
        while (i < lines.length) {
          const close = FENCE.exec(lines[i]);
          if (close && close[2][0] === marker[0] && close[2].length >= marker.length && !close[3]) break;
          // Fences inside list items are indented: drop the opener's indentation from the code.
          body.push(lines[i].startsWith(" ".repeat(indent)) ? lines[i].slice(indent) : lines[i].trimStart());
          i += 1;
        }
        i += 1; // the closing fence (or the end)
        out.append(codeBlock(body.join("\n"), `Copy code${fence[3] ? ` (${fence[3]})` : ""}`));
        continue;
      }
      if (!line.trim()) {
        i += 1;
        continue;
      }
      const heading = HEADING.exec(line);
      if (heading) {
        out.append(inline(heading[2], el("h4")));
        i += 1;
        continue;
      }
      const item = ITEM.exec(line);
      if (item) {
        const ordered = /\d/.test(item[2]);
        const list = el(ordered ? "ol" : "ul");
        if (ordered && parseInt(item[2], 10) !== 1) list.setAttribute("start", String(parseInt(item[2], 10)));
        let current = null;
        while (i < lines.length) {
          const m = ITEM.exec(lines[i]);
          if (m && /\d/.test(m[2]) === ordered && m[1].length <= item[1].length + 1) {
            current = inline(m[3], el("li"));
            list.append(current);
            i += 1;
          } else if (current && lines[i].trim() && /^\s+/.test(lines[i]) && !FENCE.test(lines[i])) {
            current.append(document.createTextNode(" "));
            inline(lines[i].trim(), current); // a continuation line of the item
            i += 1;
          } else if (current && FENCE.test(lines[i]) && /^\s+/.test(lines[i])) {
            // A fenced block indented under the item: render it inside the item.
            const sub = [];
            const opener = FENCE.exec(lines[i]);
            sub.push(lines[i]);
            i += 1;
            while (i < lines.length) {
              sub.push(lines[i]);
              const close = FENCE.exec(lines[i]);
              i += 1;
              if (close && close[2][0] === opener[2][0] && !close[3]) break;
            }
            current.append(renderMarkdown(sub.join("\n")));
          } else if (current && !lines[i].trim() && i + 1 < lines.length && /^\s+\S/.test(lines[i + 1])) {
            i += 1; // a blank line inside an item (before its indented code or text)
          } else {
            break;
          }
        }
        out.append(list);
        continue;
      }
      const para = [];
      while (i < lines.length && lines[i].trim() && !FENCE.test(lines[i]) && !HEADING.test(lines[i]) && !ITEM.test(lines[i])) {
        para.push(lines[i].trim());
        i += 1;
      }
      out.append(inline(para.join("\n"), el("p")));
    }
    return out;
  }

  // -- the diagnosis -----------------------------------------------------------------------------

  function fillList(listId, blockId, items, build, emptyText) {
    const list = $(listId);
    clear(list);
    items.forEach((item, index) => list.append(build(item, index)));
    if (!items.length && emptyText) list.append(el("li", { className: "hint", text: emptyText }));
    if (blockId) $(blockId).hidden = !items.length && !emptyText;
  }

  function asArray(value) {
    return Array.isArray(value) ? value : [];
  }

  function renderDiagnosis(d) {
    const title = $("result-title");
    clear(title);
    inline(d.title || "Diagnosis", title); // a title's `code` spans become <code>, as the cause's do
    $("result-category").textContent = d.category || "unknown";
    const confidence = Number(d.confidence);
    $("result-confidence").textContent = Number.isFinite(confidence) ? `${Math.round(confidence * 100)}%` : "n/a";
    $("result-backend").textContent = d.backend || "none";

    const error = $("result-error");
    error.textContent = d.error || "";
    error.hidden = !d.error;
    const location = $("result-location");
    location.textContent = d.location ? `At ${d.location}` : "";
    location.hidden = !d.location;
    const cause = $("result-cause");
    clear(cause);
    inline(d.cause || d.summary || "", cause); // `code` spans become <code>; everything else stays text

    fillList("result-fixes", "result-fixes-block", asArray(d.fixes), (fix, index) => {
      const item = el("li", { className: "fix" });
      item.append(inline(fix.title || "Fix", el("div", { className: "fix-title" })));
      if (fix.detail) item.append(inline(fix.detail, el("p", { className: "fix-detail" })));
      if (fix.code) item.append(codeBlock(fix.code, `Copy the code of fix: ${fix.title || index + 1}`));
      const cited = asArray(fix.sources);
      if (cited.length) item.append(el("p", { className: "fix-sources", text: `Sources: ${cited.join(", ")}` }));
      return item;
    });

    fillList("result-sources", null, asArray(d.sources), (src) => {
      const item = el("li", { className: "source", attrs: { "data-source-id": src.id || "" } });
      item.append(el("code", { className: "source-id", text: src.id || "" }));
      if (src.title) item.append(document.createTextNode(` ${src.title}`));
      if (src.path) item.append(document.createTextNode(" "), el("span", { className: "source-path", text: `(${src.path})` }));
      return item;
    }, "No sources cited.");

    fillList("result-evidence", "result-evidence-block", asArray(d.evidence), (fact) => {
      const item = el("li");
      if (fact.kind) item.append(el("span", { className: "evidence-kind", text: fact.kind }), document.createTextNode(": "));
      inline(fact.text || "", item);
      return item;
    });

    fillList("result-notes", "result-notes-block", asArray(d.notes), (note) => el("li", { text: note }));
    $("result").hidden = false;
  }

  // -- the conversation --------------------------------------------------------------------------

  function addTurn(role, content) {
    const item = el("li", { className: role === "user" ? "user" : "assistant" });
    item.append(el("span", { className: "who", text: role === "user" ? "You" : "torchhelp" }));
    if (role === "user") item.append(el("p", { text: content }));
    else item.append(renderMarkdown(content));
    $("conversation").append(item);
    return item;
  }

  function resetConversation() {
    state.messages = [];
    state.diagnosis = null;
    state.answer = "";
    state.retry = null;
    clear($("conversation"));
    $("result").hidden = true;
    $("chat").hidden = true;
  }

  async function diagnose() {
    if (state.busy) return;
    const text = $("error-text").value;
    if (!text.trim()) {
      setStatus("Paste an error, a traceback or a log first (or drop a log file).", "error");
      $("error-text").focus();
      return;
    }
    const size = new TextEncoder().encode(text).length;
    if (size > MAX_BYTES) {
      setStatus(`The text is ${mb(size)}; this page sends at most ${mb(MAX_BYTES)}. Paste only the traceback or the end of the log (a dropped file is cut to its last ${mb(MAX_BYTES)} for you).`, "error");
      return;
    }
    const messages = [{ role: "user", content: text }];
    setBusy(true, "Diagnosing…");
    let reply;
    try {
      reply = await postChat(messages);
    } catch (err) {
      setBusy(false);
      explain(err, diagnose);
      return;
    }
    setBusy(false);
    resetConversation();
    state.messages = [...messages, { role: "assistant", content: reply.content }];
    state.answer = reply.content;
    $("chat").hidden = false;
    if (reply.diagnosis) {
      state.diagnosis = reply.diagnosis;
      renderDiagnosis(reply.diagnosis);
      setStatus(`Diagnosed: ${reply.diagnosis.category || "unknown"}. Ask a follow-up below.`, "ok");
      $("result-title").focus({ preventScroll: false });
    } else {
      addTurn("assistant", reply.content);
      setStatus("No error or log found in that text: see the reply below.", "ok");
    }
  }

  async function followUp() {
    if (state.busy) return;
    const box = $("followup");
    const question = box.value.trim();
    if (!question) {
      setStatus("Type a question first.", "error");
      box.focus();
      return;
    }
    if (!state.messages.length) {
      setStatus("Diagnose an error first.", "error");
      return;
    }
    const messages = [...state.messages, { role: "user", content: question }];
    const pending = addTurn("user", question);
    setBusy(true, "Thinking…");
    let reply;
    try {
      reply = await postChat(messages);
    } catch (err) {
      setBusy(false);
      pending.remove(); // not part of the conversation: the question stays in the box to resend
      explain(err, followUp);
      return;
    }
    setBusy(false);
    box.value = "";
    state.messages = [...messages, { role: "assistant", content: reply.content }];
    addTurn("assistant", reply.content);
    const d = reply.diagnosis;
    if (d && (!state.diagnosis || d.error !== state.diagnosis.error || d.category !== state.diagnosis.category)) {
      state.diagnosis = d; // the follow-up carried a new error: show its diagnosis
      renderDiagnosis(d);
    }
    setStatus("Answered.", "ok");
    box.focus();
  }

  // -- files -------------------------------------------------------------------------------------

  function readAsText(blob) {
    if (typeof blob.text === "function") return blob.text();
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(String(reader.result));
      reader.onerror = () => reject(reader.error);
      reader.readAsText(blob);
    });
  }

  async function loadFile(file) {
    if (!file) return;
    let blob = file;
    let note = "";
    if (file.size > MAX_BYTES) {
      // The traceback is almost always at the end of a log: keep the tail.
      blob = file.slice(file.size - MAX_BYTES);
      note = `${file.name} is ${mb(file.size)}; only its last ${mb(MAX_BYTES)} were read (the limit here). Press Diagnose.`;
    }
    let text;
    try {
      text = await readAsText(blob);
    } catch (err) {
      setStatus(`Could not read ${file.name}: ${err && err.message ? err.message : err}`, "error");
      return;
    }
    const head = text.slice(0, 65536);
    const nuls = head.split("\u0000").length - 1;
    if (nuls > 0 && nuls * 100 > head.length) {
      setStatus(`${file.name} does not look like a text log (compressed or binary?). Unpack it, or paste the traceback.`, "error");
      return;
    }
    $("error-text").value = text;
    setStatus(note || `Loaded ${file.name} (${file.size < 1024 ? `${file.size} bytes` : mb(file.size)}). Press Diagnose.`, note ? "warn" : "ok");
  }

  // -- wiring ------------------------------------------------------------------------------------

  function init() {
    $("token").value = getToken();

    $("token-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const value = $("token").value.trim();
      saveToken(value);
      setStatus(value ? "Token saved for this tab." : "Token cleared.", "ok");
      const retry = state.retry;
      state.retry = null;
      if (retry && value) retry();
    });
    $("token-forget").addEventListener("click", () => {
      saveToken("");
      $("token").value = "";
      setStatus("Token forgotten.", "ok");
    });

    $("diagnose-form").addEventListener("submit", (event) => {
      event.preventDefault();
      diagnose();
    });
    $("followup-form").addEventListener("submit", (event) => {
      event.preventDefault();
      followUp();
    });
    $("error-text").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        diagnose();
      }
    });
    $("followup").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        followUp();
      }
    });
    $("clear").addEventListener("click", () => {
      resetConversation();
      $("error-text").value = "";
      $("file-input").value = "";
      $("followup").value = "";
      setStatus("");
      $("error-text").focus();
    });
    $("copy-answer").addEventListener("click", (event) => copyText(state.answer, event.currentTarget));

    $("file-input").addEventListener("change", (event) => {
      const files = event.target.files;
      if (files && files.length) loadFile(files[0]);
    });

    // Drag and drop anywhere on the page (dropping outside the box must not navigate away).
    const zone = $("drop-zone");
    let depth = 0;
    document.addEventListener("dragenter", (event) => {
      event.preventDefault();
      depth += 1;
      zone.classList.add("dragging");
    });
    document.addEventListener("dragleave", () => {
      depth = Math.max(0, depth - 1);
      if (!depth) zone.classList.remove("dragging");
    });
    document.addEventListener("dragover", (event) => {
      event.preventDefault();
      if (event.dataTransfer) event.dataTransfer.dropEffect = "copy";
    });
    document.addEventListener("drop", (event) => {
      event.preventDefault();
      depth = 0;
      zone.classList.remove("dragging");
      const data = event.dataTransfer;
      if (!data) return;
      if (data.files && data.files.length) {
        loadFile(data.files[0]);
      } else {
        const dropped = data.getData("text/plain");
        if (dropped) $("error-text").value = dropped;
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
