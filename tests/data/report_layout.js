// Measures Snakemake's report as a reader sees it (tests/report/test_report_layout.py injects it into a
// copy of report.html): the landing page at scroll position 0 and scrolled to its end, then every
// result that opens inside the report (images, HTML pages), each opened as its button opens it
// (app.setView) and measured at the start and at the end of its scroll range. Writes the boxes
// (getBoundingClientRect, in window pixels) as JSON into a pre element with the id "layout".
window.addEventListener("load", () => {
  const out = {view: {width: innerWidth, height: innerHeight}, landing: null, pages: {}};
  const box = r => ({top: r.top, bottom: r.bottom, left: r.left, right: r.right});
  const scroller = () => document.querySelector("#app > div > nav + div");
  function view() {  // the part of the window the content area shows
    const s = scroller().getBoundingClientRect();
    const c = scroller();
    return {top: Math.max(s.top, 0), left: Math.max(s.left, 0),
            bottom: Math.min(s.top + c.clientHeight, innerHeight),
            right: Math.min(s.left + c.clientWidth, innerWidth)};
  }
  function textLine(root, last) {  // the box of the first (last) visible character under root
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let found = null;
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const t = n.textContent;
      if (!t.trim()) continue;
      const i = last ? t.trimEnd().length - 1 : t.search(/\S/);
      const r = document.createRange();
      r.setStart(n, i);
      r.setEnd(n, i + 1);
      const b = r.getBoundingClientRect();
      if (b.width === 0 && b.height === 0) continue;
      found = {...box(b), text: t.trim().slice(0, 60)};
      if (!last) break;
    }
    return found;
  }
  function scrollToEnd() {
    const c = scroller();
    c.scrollTop = c.scrollHeight;
    c.scrollLeft = c.scrollWidth;
    window.scrollTo(document.body.scrollWidth, document.body.scrollHeight);
  }
  function scrollToStart() {
    scroller().scrollTop = 0;
    scroller().scrollLeft = 0;
    window.scrollTo(0, 0);
  }
  function landing() {
    const prose = document.querySelector("#app .prose");
    const heads = [...prose.querySelectorAll("h1, h2, h3")];
    const findings = heads.find(h => h.textContent.trim() === "Findings");
    const c = scroller();
    const res = {view: view(), scrollHeight: c.scrollHeight, clientHeight: c.clientHeight,
                 heading: {...box(heads[0].getBoundingClientRect()), text: heads[0].textContent.trim()},
                 findings: findings ? {...box(findings.getBoundingClientRect())} : null,
                 findingsFirstLine: findings ? textLine(findings.nextElementSibling, false) : null};
    scrollToEnd();
    res.viewAtEnd = view();
    res.lastLine = textLine(prose, true);
    scrollToStart();
    return res;
  }
  const keys = Object.keys(results).filter(
    k => /^image\//.test(results[k].mime_type) || results[k].mime_type === "text/html");
  let step = 0, asked = false;
  const poll = setInterval(() => {
    if (!out.landing) {
      if (document.querySelector("#app .prose")) out.landing = landing();
      return;
    }
    if (step >= keys.length) {
      clearInterval(poll);
      const pre = document.createElement("pre");
      pre.id = "layout";
      pre.textContent = JSON.stringify(out);
      document.body.appendChild(pre);
      return;
    }
    const key = keys[step], entry = results[key];
    const kind = entry.mime_type === "text/html" ? "html" : "img";
    if (!asked) {
      app.setView({content: kind, contentPath: entry.data_uri, resultPath: key});
      asked = true;
      return;
    }
    const el = [...document.querySelectorAll(`#app ${kind === "img" ? "img" : "iframe"}`)].find(
      i => i.src === entry.data_uri);
    if (!el || (kind === "img" && !(el.complete && el.naturalWidth))) return;
    scrollToStart();
    const page = {view: view(), first: box(el.getBoundingClientRect())};
    scrollToEnd();
    page.viewAtEnd = view();
    page.end = box(el.getBoundingClientRect());
    scrollToStart();
    out.pages[key] = page;
    step += 1;
    asked = false;
  }, 100);
});
