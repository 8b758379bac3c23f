// textgym view: the episode list, its filters and sorting, and one episode's panels.
// Every text from a record goes into the page through textContent (h() below), never as HTML.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("data").textContent);
  const STRINGS = DATA.strings, EPISODES = DATA.episodes, VOCAB = DATA.vocab;
  const $ = (selector, root) => (root || document).querySelector(selector);
  const NONE = "(none)";

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : String(c));
    }
    return el;
  }
  const text = (m) => STRINGS[m.c];
  const num = (x) => (typeof x === "number" && Number.isFinite(x) ? x : 0);
  const asText = (x) => { try { return JSON.stringify(x, null, 2) ?? String(x); } catch (e) { return String(x); } };

  // A part of the page built from a record's field; a field of a shape the panel does not know
  // (a record from another version, or hand-edited) shows as its data instead of stopping the page.
  function guarded(what, raw, build) {
    try {
      return build();
    } catch (e) {
      return h("div", { class: "unshown" },
        h("p", { class: "note" }, `This record's ${what} could not be drawn (${e.message}); its data as recorded:`),
        h("pre", { class: "box" }, asText(raw)));
    }
  }
  const fmt = (x, digits) => (x === null || x === undefined ? "" : typeof x === "number" ? x.toFixed(digits) : typeof x === "object" ? asText(x) : String(x));
  const endBadge = (end) => h("span", { class: "end end-" + (end || "unknown") }, end || "unrecorded");
  const fileOf = (ep) => (ep.source || "").replace(/:\d+$/, "");

  // ----- the list -----

  const FILTERS = {
    env: (ep) => ep.env, policy: (ep) => ep.policy, step: (ep) => ep.step, group: (ep) => ep.group,
    end: (ep) => ep.end || "unrecorded", success: (ep) => (ep.success ? "yes" : "no"), reward: (ep) => fmt(ep.reward, 3),
  };
  const state = { sort: "i", dir: 1, shown: [] };

  function fillFilters() {
    for (const [name, get] of Object.entries(FILTERS)) {
      const select = $("#f-" + name);
      const values = [...new Set(EPISODES.map((ep) => get(ep)))];
      values.sort((a, b) => (typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b))));
      select.append(h("option", { value: "" }, "all"));
      for (const v of values) {
        const label = v === null || v === undefined ? NONE : String(v);
        select.append(h("option", { value: label }, label));
      }
      select.closest("label").hidden = values.length < 2;  // nothing to choose between
      select.addEventListener("change", refresh);
    }
    let typing = null;  // refresh once the typing pauses, not on every key
    $("#f-q").addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(refresh, 120); });
  }

  function matcher() {
    const wanted = Object.entries(FILTERS).map(([name, get]) => [get, $("#f-" + name).value]).filter(([, want]) => want);
    const q = $("#f-q").value.trim().toLowerCase();
    return (ep) => {
      for (const [get, want] of wanted) {
        const v = get(ep);
        if ((v === null || v === undefined ? NONE : String(v)) !== want) return false;
      }
      return !q || [ep.task, ep.seed, ep.source, ep.env, ep.policy].some((v) => v !== null && v !== undefined && String(v).toLowerCase().includes(q));
    };
  }

  function compare(a, b) {
    const x = a[state.sort], y = b[state.sort];
    if (x === y) return a.i - b.i;
    if (x === null || x === undefined) return 1;  // missing values last, whatever the direction
    if (y === null || y === undefined) return -1;
    const order = typeof x === "number" || typeof x === "boolean" ? x - y : String(x).localeCompare(String(y));
    return order * state.dir || a.i - b.i;
  }

  function refresh() {
    state.shown = EPISODES.filter(matcher()).sort(compare);
    $("#episodes tbody").replaceChildren(...state.shown.map(row));
    $("#count").textContent = `${state.shown.length} of ${EPISODES.length} episodes`;
    for (const th of document.querySelectorAll("#episodes th")) {
      th.classList.toggle("asc", th.dataset.key === state.sort && state.dir > 0);
      th.classList.toggle("desc", th.dataset.key === state.sort && state.dir < 0);
    }
  }

  // Policy, step and group are left out when no record has them (a training run, an eval file).
  const COLUMNS = [
    ["i", "#", (ep) => ep.i], ["env", "env", (ep) => h("span", { title: ep.env }, shortEnv(ep.env))],
    ["policy", "policy", (ep) => h("span", { title: ep.policy }, ep.policy ?? "")], ["step", "step", (ep) => ep.step ?? ""],
    ["task", "task", (ep) => h("span", { title: ep.task }, ep.task ?? "")], ["group", "group", (ep) => ep.group ?? ""],
    ["reward", "reward", (ep) => fmt(ep.reward, 3)],
    ["success", "success", (ep) => h("span", { class: ep.success ? "yes" : "no" }, ep.success ? "yes" : "no")],
    ["end", "end reason", (ep) => endBadge(ep.end)],
  ].filter(([key]) => !["policy", "step", "group"].includes(key) || EPISODES.some((ep) => ep[key] !== null && ep[key] !== undefined));

  function header() {
    $("#episodes thead").replaceChildren(h("tr", {}, COLUMNS.map(([key, label]) => h("th", {
      "data-key": key,
      onclick: () => { state.dir = state.sort === key ? -state.dir : 1; state.sort = key; refresh(); },
    }, label))));
  }

  const ROWS = new Map();  // each row is built once; filtering and sorting only re-order them
  function row(ep) {
    if (!ROWS.has(ep.i)) {
      ROWS.set(ep.i, h("tr", { "data-i": ep.i, onclick: () => (location.hash = "#" + ep.i) },
        COLUMNS.map(([key, , cell]) => h("td", { class: "c-" + key }, cell(ep)))));
    }
    return ROWS.get(ep.i);
  }
  const shortEnv = (env) => String(env || "").replace(/^textgym\//, "");

  // ----- one episode -----

  function show(i) {
    const ep = EPISODES[i];
    if (!ep) return;
    for (const tr of document.querySelectorAll("#episodes tbody tr.selected")) tr.classList.remove("selected");
    const selectedRow = row(ep);
    selectedRow.classList.add("selected");
    if (selectedRow.isConnected) selectedRow.scrollIntoView({ block: "nearest" });
    const detail = $("#detail");
    let turns = 0;
    const turnOf = ep.messages.map((m) => (m.role === "assistant" ? turns++ : null));  // each assistant message's turn
    detail.replaceChildren(...[
      h("h2", {}, `#${ep.i} · ${ep.env} · ${ep.task ?? ""}`),
      h("div", { class: "meta" },
        meta("policy", ep.policy), meta("step", ep.step), meta("seed", ep.seed), meta("group", ep.group),
        meta("reward", fmt(ep.reward, 3)), meta("success", ep.success ? "yes" : "no"), h("span", {}, "end ", endBadge(ep.end)),
        meta("turns", ep.turns), meta("advantage", fmt(ep.advantage, 3)), meta("record", ep.source)),
      guarded("group", ep.group, () => groupPanel(ep)),
      h("h3", {}, "Conversation"),
      h("div", { id: "conversation" }, ep.messages.map((m, j) => guarded("message", { ...m, content: text(m) }, () => message(m, turnBadge(ep, turnOf[j]))))),
      h("h3", {}, guarded("verification", null, () => envTitle(ep))),
      h("div", { id: "env-panel" }, guarded("verification", ep.verifications, () => envPanel(ep))),
      h("h3", {}, "Tokens"), h("div", { id: "token-panel" }, guarded("tokens", ep.tokens, () => tokenPanel(ep)))].filter(Boolean));
    detail.scrollTop = 0;
  }
  const meta = (k, v) => (v === null || v === undefined || v === "" ? null : h("span", {}, k + " ", h("b", {}, String(v))));

  function groupPanel(ep) {
    if (ep.group === null || ep.group === undefined) return null;
    const key = (e) => [e.env, e.policy, e.step, e.group, fileOf(e)].join("\u0000");
    const mine = key(ep);
    const siblings = EPISODES.filter((e) => key(e) === mine);
    if (siblings.length < 2) return null;
    const rewards = siblings.map((e) => num(e.reward));
    const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
    return h("div", { id: "group-panel" },
      h("h3", {}, `Group ${ep.group}: ${siblings.length} episodes, mean reward ${mean.toFixed(3)}`),
      h("table", { class: "rows group" },
        h("tr", {}, h("th", {}, "#"), h("th", {}, "reward"), h("th", {}, "advantage"), h("th", {}, "end reason")),
        siblings.map((e) => h("tr", { onclick: () => (location.hash = "#" + e.i) },
          h("td", { class: e.i === ep.i ? "me" : null }, e.i === ep.i ? `${e.i} (this)` : e.i), h("td", {}, fmt(e.reward, 3)),
          h("td", {}, e.advantage === null || e.advantage === undefined ? "n/a" : fmt(e.advantage, 3)), h("td", {}, endBadge(e.end))))));
  }

  // The reward of the env step that answered a turn, and the turn's advantage where the run trained on one.
  function turnBadge(ep, t) {
    const rewards = ep.turn_rewards, advantages = ep.turn_advantages, states = ep.turn_states;
    if (t === null || !Array.isArray(rewards) || t >= rewards.length) return null;
    const adv = Array.isArray(advantages) && t < advantages.length ? ` \u00b7 advantage ${fmt(advantages[t], 3)}` : "";
    const state = Array.isArray(states) && t < states.length ? `state ${states[t]}` : null;
    return h("span", { class: "turn-reward", title: state }, `turn ${t + 1} \u00b7 reward ${fmt(rewards[t], 3)}${adv}`);
  }

  function message(m, badge) {
    const content = text(m);
    const role = m.role === "tool" ? `tool result${m.name ? ": " + m.name : ""}` : m.role;
    const body = m.role === "system" && content.length > 400
      ? h("details", {}, h("summary", {}, `system prompt (${content.length} characters)`), h("pre", {}, content))
      : content ? h("pre", {}, m.role === "assistant" ? marked(content) : content) : null;
    const calls = (m.tool_calls || []).map((c) => {
      const f = c.function || c;
      let args = f.arguments;
      try { args = JSON.stringify(typeof args === "string" ? JSON.parse(args) : args); } catch (e) { /* shown as sent */ }
      return h("div", { class: "call" }, `\u2192 ${f.name}(${args})`);
    });
    return h("div", { class: "msg " + m.role }, h("div", { class: "role" }, role, badge), body, calls);
  }

  // <tool_call> and <answer> blocks written as text stand out from the prose around them.
  function marked(content) {
    const parts = content.split(/(<tool_call>[\s\S]*?<\/tool_call>|<answer>[\s\S]*?(?:<\/answer>|$))/);
    return parts.map((p, k) => (k % 2 ? h("span", { class: p.startsWith("<tool_call>") ? "inline-call" : "inline-answer" }, p) : p));
  }

  // ----- env panels -----

  const verdict = (ep) => {
    const all = ep.verifications;
    if (!Array.isArray(all) || !all.length) return null;
    const last = all[all.length - 1];
    return last && typeof last === "object" ? last.verification : last;
  };

  function envTitle(ep) {
    const v = verdict(ep);
    if (v && typeof v === "object" && "puzzle" in v) return "Board";
    if (v && typeof v === "object" && "diff" in v) return "Database";
    if (v && typeof v === "object" && "tests" in v) return "Tests";
    return "Verification";
  }

  function envPanel(ep) {
    const v = verdict(ep);
    if (!v) return h("p", { class: "note" }, "This record carries no verification (it was written before records kept them, or the episode ended without one).");
    if (typeof v === "object" && "puzzle" in v) return sudokuPanel(v);
    if (typeof v === "object" && "diff" in v) return workplacePanel(v);
    if (typeof v === "object" && "tests" in v) return codePanel(ep);
    return h("pre", { class: "box panel" }, JSON.stringify(v, null, 2));
  }

  const BOXES = { 4: [2, 2], 6: [2, 3], 9: [3, 3] };

  function sudokuPanel(v) {
    const n = Math.round(Math.sqrt(v.puzzle.length));
    const [br, bc] = BOXES[n] || [n, n];
    const board = (cells, caption, end) => {
      const rows = [];
      for (let r = 0; r < n; r++) {
        const tds = [];
        for (let c = 0; c < n; c++) {
          const k = r * n + c, given = v.puzzle[k] !== ".", ch = cells[k];
          let cls = given ? "given" : ch === "." || ch === "0" ? "blank" : "changed";
          const altered = end && given && ch !== v.puzzle[k];
          if (altered || (end && !given && cls !== "blank" && ch !== v.solution[k])) cls = "wrong";
          const title = altered ? `wrong: a given the agent altered (it was ${v.puzzle[k]})`
            : cls + (end && cls === "wrong" ? `: the solution has ${v.solution[k]}` : "");
          if ((c + 1) % bc === 0 && c + 1 < n) cls += " br";
          if ((r + 1) % br === 0 && r + 1 < n) cls += " bb";
          tds.push(h("td", { class: cls, title },
            ch === "." || ch === "0" ? "" : ch));
        }
        rows.push(h("tr", {}, tds));
      }
      return h("figure", { class: "board" }, h("figcaption", {}, caption), h("table", {}, rows));
    };
    const wrong = [...v.board].filter((ch, k) => v.puzzle[k] === "." && ch !== "." && ch !== v.solution[k]).length;
    const changed = [...v.board].filter((ch, k) => v.puzzle[k] === "." && ch !== ".").length;
    const altered = [...v.board].filter((ch, k) => v.puzzle[k] !== "." && ch !== v.puzzle[k]).length;
    return h("div", { class: "panel" },
      h("p", {}, `${v.reason} (by ${v.by}; ${v.correct} of ${v.blanks} blanks correct, ${changed} filled, ${wrong} wrong`
        + (altered ? `, ${altered} given${altered > 1 ? "s" : ""} altered)` : ")")),
      h("div", { class: "boards" }, board(v.puzzle, "start", false), board(v.board, "end", true)),
      h("div", { class: "legend" },
        h("span", {}, h("span", { class: "swatch", style: "background:#f1f2f4" }), "given"),
        h("span", {}, h("span", { class: "swatch", style: "background:#ddeefe" }), "filled by the agent"),
        h("span", {}, h("span", { class: "swatch", style: "background:#fbd5d5" }), "wrong (not the solution's digit, or an altered given)"),
        h("span", {}, h("span", { class: "swatch", style: "background:#fff" }), "still blank")));
  }

  function rowsTable(rows, kind, stray, changedCells) {
    if (!rows.length) return null;
    const columns = [...new Set(rows.flatMap((r) => Object.keys(kind === "changed" ? { id: r.id, ...r.after } : r)))];
    return h("div", { class: "scroll" }, h("table", { class: "rows" },
      h("tr", {}, columns.map((c) => h("th", {}, c))),
      rows.flatMap((r) => {
        const cls = kind + (stray && stray.has(r.id) ? " stray" : "");
        if (kind !== "changed") return [h("tr", { class: cls }, columns.map((c) => h("td", { title: fmt(r[c]) }, fmt(r[c]))))];
        const after = { id: r.id, ...r.after }, before = { id: r.id, ...r.before };
        return [h("tr", { class: cls, title: "after" }, columns.map((c) =>
          h("td", { class: before[c] !== after[c] ? "diffcell" : null, title: before[c] !== after[c] ? `was: ${fmt(before[c])}` : fmt(after[c]) }, fmt(after[c]))))];
      })));
  }

  function editsBlock(title, edits, stray) {
    const parts = [];
    for (const kind of ["added", "changed", "deleted"]) {
      const rows = (edits && edits[kind]) || [];
      if (rows.length) parts.push(h("h4", {}, `${kind} (${rows.length})`), rowsTable(rows, kind, stray));
    }
    return h("div", {}, h("h4", {}, title), parts.length ? parts : h("p", { class: "note" }, "no changes"));
  }

  function workplacePanel(v) {
    const flag = (name, on, what) => h("span", { class: "flag " + (on ? "on" : "off"), title: what }, `${name}: ${on ? "yes" : "no"}`);
    const tables = Object.keys(v.changes || {});
    const out = [
      h("p", {}, v.reason),
      h("p", {}, flag("side effects", v.side_effect, "the agent changed rows the task leaves alone, or made extra rows"),
        flag("no-op task", v.noop, "the task needs no change at all"), v.env_error ? flag("env error", true, v.env_error) : null),
    ];
    if (!v.changes) out.push(h("p", { class: "note" }, "This record predates the per-table changes; the diff alone:"));
    for (const name of tables) {
      const c = v.changes[name], stray = new Set(c.side_effects || []);
      out.push(h("h4", { class: "table-name" }, `table ${name}`),
        stray.size ? h("p", { class: "no" }, `side effects on ${[...stray].join(", ")}`) : null,
        editsBlock("what the agent did", c.agent, stray), editsBlock("what the task expected", c.expected, null));
    }
    for (const [name, d] of Object.entries(v.diff || {})) {
      out.push(h("h4", {}, `still different in ${name}`),
        d.missing.length ? [h("div", { class: "note" }, "expected rows that are missing"), rowsTable(d.missing, "missing")] : null,
        d.unexpected.length ? [h("div", { class: "note" }, "rows that should not be there"), rowsTable(d.unexpected, "unexpected")] : null);
    }
    if (v.ground_truth_errors) out.push(h("p", { class: "no" }, "ground truth errors: " + v.ground_truth_errors.join("; ")));
    return h("div", { class: "panel" }, out);
  }

  function codePanel(ep) {
    const subs = ep.verifications.filter((x) => x.verification && x.verification.tests);
    return h("div", {}, subs.map((x, k) => {
      const v = x.verification;
      return h("div", { class: "panel submission", style: "margin-bottom:1em" },
        h("h4", {}, `submission ${k + 1} (turn ${x.turn}): ${v.passed} of ${v.total} tests passed`),
        v.sandbox_error ? h("p", { class: "no" }, "sandbox failure: " + v.sandbox_error) : null,
        v.load_error ? h("pre", { class: "box" }, "load error: " + v.load_error) : null,
        h("table", { class: "rows tests" },
          h("tr", {}, ["#", "", "input", "expected", "got", "error"].map((c) => h("th", {}, c))),
          v.tests.map((t) => h("tr", { class: t.passed ? "pass" : "fail" },
            h("td", {}, t.index + 1), h("td", { class: "status" }, t.passed ? "pass" : t.timeout ? "timeout" : "fail"),
            ["input", "expected", "got"].map((c) => h("td", {}, h("pre", {}, t[c] ?? ""))),
            h("td", {}, v.load_error && t.error === v.load_error ? h("span", { class: "note" }, "(the load error above)") : h("pre", {}, t.error ?? ""))))));
    }));
  }

  // ----- tokens -----

  const FOLD = 300;  // env-token runs longer than this start folded

  function tokenPanel(ep) {
    const t = ep.tokens;
    if (!t) return h("p", { class: "note" }, "This record has no tokens (a text env, not TokenObservation).");
    const policy = new Array(t.ids.length).fill(-1);  // index into t.logprobs, or -1 off the mask
    let k = 0;
    for (const [a, b] of t.spans) for (let j = a; j < b; j++) policy[j] = k++;
    const lps = t.logprobs || [];
    const finite = lps.filter((x) => typeof x === "number");
    const mean = finite.length ? finite.reduce((a, b) => a + b, 0) / finite.length : null;
    const info = h("div", { id: "tokinfo" }, "hover a token: its id, whether it is trained, and the sampler's logprob");
    const spans = t.ids.map((id, j) => {
      const p = policy[j], lp = p >= 0 && typeof lps[p] === "number" ? lps[p] : null;
      const shown = VOCAB ? VOCAB[id] ?? `[${id}]` : `[${id}] `;
      let cls = p >= 0 ? "p" : "e";
      if (lp !== null && lp < -4) cls += " vlow";
      else if (lp !== null && lp < -1.5) cls += " low";
      const title = `token ${j} · id ${id} · ${p >= 0 ? "policy (trained)" : "env (not trained)"}` + (lp !== null ? ` · logprob ${lp.toFixed(3)}` : "");
      return h("span", { class: cls, title, "data-lp": lp === null ? null : lp.toFixed(3) }, shown);
    });
    // Long runs of env tokens (the system prompt, tool lists) fold away so the policy's turns show.
    const chunks = [];
    for (let j = 0; j < spans.length;) {
      let end = j;
      while (end < spans.length && (policy[end] >= 0) === (policy[j] >= 0)) end++;
      const run = spans.slice(j, end);
      chunks.push(policy[j] < 0 && run.length > FOLD ? h("details", { class: "fold" }, h("summary", {}, `${run.length} env tokens`), run) : run);
      j = end;
    }
    const box = h("div", { class: "tokens" }, chunks);
    box.addEventListener("mouseover", (e) => { if (e.target.title) info.textContent = e.target.title; });
    return h("div", {},
      h("div", { class: "meta" }, meta("tokens", t.ids.length), meta("policy tokens", k),
        meta("mean logprob", mean === null ? null : mean.toFixed(3)), VOCAB ? null : h("span", {}, "(no tokenizer: ids shown)")),
      h("div", { class: "legend" },
        h("span", {}, h("span", { class: "swatch", style: "background:#d8f3df" }), "policy token (loss mask 1)"),
        h("span", {}, h("span", { class: "swatch", style: "background:#eef0f3" }), "env / prompt token (mask 0)"),
        t.logprobs ? h("span", {}, h("span", { class: "swatch", style: "box-shadow:inset 0 -3px 0 #f2a93b" }), "underlined: logprob < -1.5") : null,
        t.logprobs ? h("span", {}, h("span", { class: "swatch", style: "box-shadow:inset 0 -3px 0 #d9452b" }), "logprob < -4") : null),
      info, box);
  }

  // ----- wiring -----

  header();
  fillFilters();
  refresh();
  const route = () => { const i = parseInt(location.hash.slice(1), 10); if (!Number.isNaN(i)) show(i); };
  window.addEventListener("hashchange", route);
  route();
})();
