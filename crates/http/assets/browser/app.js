// The bufferbloat test page's runner: phases, load, probes, chart, result.
//
// What it measures (docs/browser.md has the long version):
// * Load: parallel fetches of the server's large object (download) and
//   POSTs of a block of zeros to its upload sink (XMLHttpRequest, whose
//   progress events count the bytes sent), restarted as they end.
// * Latency: a GET of the 1-byte object every probe interval, each with a
//   fresh URL, `cache: 'no-store'` and `credentials: 'omit'`. Browsers keep
//   requests without credentials in another connection pool than the
//   page's own, so the probes run on their own connection, not queued
//   behind the load's streams. A probe's round trip is its Resource Timing
//   `responseStart - requestStart` (request sent to first response byte,
//   without connection setup), or the time until `fetch` resolved when the
//   browser gives no timing entry.
// * Everything is in page time (performance.now()), probes are kept in
//   whole nanoseconds for the statistics (stats.js).
'use strict';

(function () {
  const S = window.bloatlabStats;
  const $ = function (id) { return document.getElementById(id); };
  const query = new URLSearchParams(location.search);
  const key = query.get('key');
  const COLORS = {
    idle: '#e9ebef', download: '#dbe8fb', upload: '#fde6d2', bidirectional: '#ebdff7',
  };
  // Probes unanswered this long count as lost.
  const PROBE_TIMEOUT_MS = 10000;
  // How long the end of the test waits for probes still out.
  const GRACE_MS = 2000;
  // Throughput samples: every 250 ms, live figure over the last second.
  const TICK_MS = 250;
  const LIVE_WINDOW_MS = 1000;

  let P = null;
  let run = null;
  const api = window.bloatlab = { stats: S, state: 'loading', result: null, error: null };

  function url(path, extra) {
    const u = new URL(path, location.origin);
    if (key) {
      u.searchParams.set('key', key);
    }
    for (const k in extra || {}) {
      u.searchParams.set(k, extra[k]);
    }
    return u.pathname + u.search;
  }

  function setState(s) {
    api.state = s;
    document.body.dataset.state = s;
  }

  function say(text, error) {
    const m = $('message');
    m.textContent = text;
    m.className = error ? 'error' : '';
  }

  function fail(text) {
    if (api.state === 'error') {
      return;
    }
    api.error = text;
    say(text, true);
    setState('error');
    if (run) {
      run.stopped = true;
      for (const c of run.loads) {
        c.abort();
      }
    }
    $('start').disabled = false;
  }

  function sleep(ms) {
    return new Promise(function (r) { setTimeout(r, ms); });
  }

  function nonce() {
    return Math.random().toString(36).slice(2, 10);
  }

  function ms(ns) {
    return ns === null ? null : ns / 1e6;
  }

  function fmtMs(ns) {
    if (ns === null || ns === undefined) {
      return '–';
    }
    const v = ns / 1e6;
    return (v < 10 ? v.toFixed(1) : v.toFixed(0)) + ' ms';
  }

  function fmtMbps(v) {
    if (v === null || v === undefined) {
      return '–';
    }
    return v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0);
  }

  // ?duration=S: whole seconds within the server's range.
  function parseDuration() {
    const d = P.duration_s;
    const raw = query.get('duration');
    if (raw === null) {
      return { seconds: d.default };
    }
    if (!/^[0-9]{1,4}$/.test(raw) || +raw < d.min || +raw > d.max) {
      return {
        error: 'Bad ?duration=' + JSON.stringify(raw).slice(0, 40) + ': give each loaded ' +
          'phase\'s length in whole seconds, from ' + d.min + ' to ' + d.max +
          ' (default ' + d.default + ').',
      };
    }
    return { seconds: +raw };
  }

  function parseAutostart() {
    const raw = query.get('autostart');
    if (raw === null || raw === '0') {
      return { on: false };
    }
    if (raw === '1') {
      return { on: true };
    }
    return { error: 'Bad ?autostart=' + JSON.stringify(raw).slice(0, 40) + ': use 1 (start at once) or 0.' };
  }

  // The phases with their times (ms from the start), settle gaps between.
  function schedule(seconds) {
    const phases = [];
    let t = 0;
    for (const p of P.phases) {
      const len = p.kind === 'idle' ? Math.min(P.idle_ms, seconds * 1000) : seconds * 1000;
      if (phases.length > 0) {
        t += P.settle_ms;
      }
      phases.push({
        name: p.name, kind: p.kind, down_streams: p.down_streams, up_streams: p.up_streams,
        start: t, end: t + len,
      });
      t += len;
    }
    return { phases: phases, end: t };
  }

  function phaseAt(t) {
    for (const p of run.plan.phases) {
      if (t >= p.start && t < p.end) {
        return p;
      }
    }
    return null;
  }

  // ---- load ----

  function refused(status, text) {
    fail('The server refused part of the test (HTTP ' + status + '): ' +
      (text || '').trim().slice(0, 300) + ' Try again later.');
  }

  async function downloadStream(signal) {
    while (!signal.aborted && !run.stopped) {
      try {
        const r = await fetch(url(P.urls.large, { s: nonce(), t: run.test.id }), { cache: 'no-store', signal: signal });
        if (!r.ok) {
          refused(r.status, await r.text());
          return;
        }
        const reader = r.body.getReader();
        for (;;) {
          const x = await reader.read();
          if (x.done) {
            break;
          }
          run.bytes.down += x.value.byteLength;
        }
      } catch (e) {
        if (signal.aborted) {
          return;
        }
        // The connection was cut (--max-duration, a proxy): open another.
        run.errors.down += 1;
        await sleep(200);
      }
    }
  }

  function uploadOnce(signal) {
    return new Promise(function (resolve) {
      const x = new XMLHttpRequest();
      let sent = 0;
      const stop = function () { x.abort(); };
      signal.addEventListener('abort', stop, { once: true });
      const done = function (ok) {
        signal.removeEventListener('abort', stop);
        resolve(ok);
      };
      x.open('POST', url(P.urls.upload, { s: nonce(), t: run.test.id }));
      x.upload.onprogress = function (e) {
        run.bytes.up += e.loaded - sent;
        sent = e.loaded;
      };
      x.onload = function () {
        if (x.status !== 200) {
          refused(x.status, x.responseText);
          done(false);
          return;
        }
        done(true);
      };
      x.onerror = function () { run.errors.up += 1; done(true); };
      x.onabort = function () { done(false); };
      x.send(run.uploadBody);
    });
  }

  async function uploadStream(signal) {
    while (!signal.aborted && !run.stopped) {
      const again = await uploadOnce(signal);
      if (!again) {
        return;
      }
    }
  }

  function startLoad(phase) {
    const c = new AbortController();
    run.loads.push(c);
    for (let i = 0; i < phase.down_streams; i++) {
      downloadStream(c.signal);
    }
    for (let i = 0; i < phase.up_streams; i++) {
      uploadStream(c.signal);
    }
    return c;
  }

  // ---- probes ----

  function onTiming(list) {
    if (!run) {
      return;
    }
    for (const e of list.getEntries()) {
      const p = run.byUrl.get(e.name);
      if (p && e.responseStart > 0 && e.requestStart > 0 && e.responseStart >= e.requestStart) {
        p.rtt = Math.round((e.responseStart - e.requestStart) * 1e6);
        p.timing = 'resource';
      }
    }
  }

  async function probe(k) {
    const path = url(P.urls.small, { p: run.id + '-' + k });
    const sent = performance.now();
    const p = { k: k, t: sent - run.t0, rtt: null, fetchNs: null, timing: null, lost: false, done: false };
    run.probes.push(p);
    run.byUrl.set(location.origin + path, p);
    const c = new AbortController();
    const timer = setTimeout(function () { c.abort(); }, PROBE_TIMEOUT_MS);
    try {
      const r = await fetch(path, { cache: 'no-store', credentials: 'omit', signal: c.signal });
      const first = performance.now();
      const text = await r.text();
      if (!r.ok) {
        refused(r.status, text);
        p.lost = true;
      } else {
        p.fetchNs = Math.round((first - sent) * 1e6);
      }
    } catch (e) {
      p.lost = true;
    }
    clearTimeout(timer);
    p.done = true;
    run.dirty = true;
  }

  // One probe per interval on the interval's grid; a late timer skips the
  // slots it missed instead of sending a burst.
  function probeLoop() {
    if (run.stopped) {
      return;
    }
    const now = performance.now() - run.t0;
    if (now >= run.plan.end) {
      return;
    }
    probe(run.nextProbe);
    const step = P.probe_interval_ms;
    run.nextProbe = Math.max(run.nextProbe + 1, Math.floor(now / step) + 1);
    setTimeout(probeLoop, Math.max(0, run.nextProbe * step - (performance.now() - run.t0)));
  }

  function rttOf(p) {
    if (p.lost || !p.done) {
      return null;
    }
    return p.rtt !== null ? p.rtt : p.fetchNs;
  }

  // ---- live view ----

  function throughputOver(t0, t1, dir) {
    // Bytes between the samples nearest t0 and t1, as Mbit/s.
    const s = run.samples;
    let a = null;
    let b = null;
    for (const x of s) {
      if (x.t <= t0 + 1) {
        a = x;
      }
      if (x.t <= t1 + 1) {
        b = x;
      }
    }
    if (!a || !b || b.t - a.t < 1) {
      return null;
    }
    return (b[dir] - a[dir]) * 8 / ((b.t - a.t) / 1000) / 1e6;
  }

  function tick() {
    const t = performance.now() - run.t0;
    run.samples.push({ t: t, down: run.bytes.down, up: run.bytes.up });
    const ph = phaseAt(t);
    const cur = run.plan.phases.find(function (p) { return t < p.end; });
    $('progress').value = Math.min(1, t / run.plan.end);
    $('phase').textContent = ph ? ph.name : (cur ? 'next: ' + cur.name : (run.stopped ? 'done' : 'finishing'));
    $('live-down').textContent = fmtMbps(throughputOver(t - LIVE_WINDOW_MS, t, 'down')) + ' Mbit/s';
    $('live-up').textContent = fmtMbps(throughputOver(t - LIVE_WINDOW_MS, t, 'up')) + ' Mbit/s';
    let last = null;
    for (let i = run.probes.length - 1; i >= 0 && last === null; i--) {
      last = rttOf(run.probes[i]);
    }
    $('live-rtt').textContent = fmtMs(last);
    draw();
  }

  function niceMax(v) {
    for (const m of [20, 50, 100, 200, 300, 500, 1000, 2000, 3000, 5000, 10000]) {
      if (v <= m) {
        return m;
      }
    }
    return Math.ceil(v / 5000) * 5000;
  }

  function draw() {
    const canvas = $('chart');
    const dpr = window.devicePixelRatio || 1;
    const cssW = canvas.clientWidth || 720;
    const cssH = Math.max(200, Math.min(320, Math.round(cssW * 0.45)));
    if (canvas.width !== Math.round(cssW * dpr) || canvas.height !== Math.round(cssH * dpr)) {
      canvas.width = Math.round(cssW * dpr);
      canvas.height = Math.round(cssH * dpr);
    }
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, cssW, cssH);
    if (!run) {
      return;
    }
    const L = 46;
    const R = 8;
    const T = 18;
    const B = 24;
    const w = cssW - L - R;
    const h = cssH - T - B;
    const rtts = [];
    for (const p of run.probes) {
      const r = rttOf(p);
      if (r !== null) {
        rtts.push(r / 1e6);
      }
    }
    const top = niceMax(Math.max(10, rtts.length ? S.quantile(rtts, 0.99) * 1.15 : 10));
    const x = function (t) { return L + w * Math.min(1, t / run.plan.end); };
    const y = function (v) { return T + h - h * Math.min(1, v / top); };
    g.font = '11px system-ui, sans-serif';
    for (const ph of run.plan.phases) {
      g.fillStyle = COLORS[ph.name] || '#eee';
      g.fillRect(x(ph.start), T, x(ph.end) - x(ph.start), h);
      g.fillStyle = '#5b6372';
      g.fillText(ph.name === 'bidirectional' ? 'both' : ph.name, x(ph.start) + 3, T - 5);
    }
    g.strokeStyle = '#d9dde4';
    g.fillStyle = '#5b6372';
    g.lineWidth = 1;
    g.textAlign = 'right';
    for (let i = 0; i <= 4; i++) {
      const v = top * i / 4;
      g.beginPath();
      g.moveTo(L, y(v) + 0.5);
      g.lineTo(L + w, y(v) + 0.5);
      g.stroke();
      g.fillText(v + ' ms', L - 4, y(v) + 4);
    }
    g.textAlign = 'center';
    const secs = run.plan.end / 1000;
    const step = secs <= 20 ? 2 : secs <= 60 ? 10 : 30;
    for (let s = 0; s <= secs; s += step) {
      g.fillText(s + ' s', x(s * 1000), T + h + 16);
    }
    g.textAlign = 'left';
    g.fillStyle = '#1f4e99';
    for (const p of run.probes) {
      const r = rttOf(p);
      if (r !== null) {
        g.fillRect(x(p.t) - 1.5, y(r / 1e6) - 1.5, 3, 3);
      } else if (p.lost) {
        g.fillStyle = '#c0392b';
        g.fillRect(x(p.t) - 1, T, 2, 6);
        g.fillStyle = '#1f4e99';
      }
    }
    g.strokeStyle = '#9aa3b2';
    g.strokeRect(L + 0.5, T + 0.5, w, h);
  }

  // ---- result ----

  function analyse() {
    const table = P.grade;
    const trim = P.rpm_trim_fraction;
    const rows = [];
    let idle = null;
    const loaded = [];
    const loadedNames = [];
    for (const ph of run.plan.phases) {
      const inPhase = run.probes.filter(function (p) { return p.t >= ph.start && p.t < ph.end; });
      const rtts = inPhase.map(rttOf).filter(function (r) { return r !== null; });
      const median = S.quantile(rtts, 0.5);
      const row = {
        name: ph.name, kind: ph.kind, start_ms: ph.start, end_ms: ph.end,
        down_streams: ph.down_streams, up_streams: ph.up_streams,
        probes: inPhase.length, lost: inPhase.length - rtts.length,
        median_ns: median, p90_ns: S.quantile(rtts, 0.9),
        induced_ns: null, probe_rpm: null, download_mbps: null, upload_mbps: null,
      };
      if (ph.kind === 'idle') {
        idle = idle || { rtts: rtts, median: median };
      } else {
        loaded.push(rtts);
        loadedNames.push(ph.name);
        row.induced_ns = idle ? S.induced(idle.median, median) : null;
        row.probe_rpm = S.probeRpm(rtts, trim);
        // Capacity: the phase's mean rate after its first second (a
        // quarter of a shorter phase), so TCP's start does not count.
        const warm = Math.min(1000, (ph.end - ph.start) / 4);
        if (ph.down_streams > 0) {
          row.download_mbps = throughputOver(ph.start + warm, ph.end, 'down');
        }
        if (ph.up_streams > 0) {
          row.upload_mbps = throughputOver(ph.start + warm, ph.end, 'up');
        }
      }
      rows.push(row);
    }
    const graded = idle ? S.gradeRun(idle.rtts, loaded, table) : null;
    const by = function (n) { return rows.find(function (r) { return r.name === n; }); };
    return {
      rows: rows,
      grade: graded ? graded.grade : null,
      increase_ns: graded ? graded.increase : null,
      grade_phase: graded ? loadedNames[graded.phase] : null,
      download_mbps: by('download') ? by('download').download_mbps : null,
      upload_mbps: by('upload') ? by('upload').upload_mbps : null,
      idle: by('idle'), download: by('download'), upload: by('upload'),
      both: by('bidirectional'),
    };
  }

  // The plain-language verdict: what rose, and what to set.
  function verdict(a) {
    const out = [];
    const aBound = P.grade.below_ms.find(function (r) { return r[0] === 'A'; });
    const fixAt = (aBound ? aBound[1] : P.grade.below_ms[0][1]) * 1e6;
    if (a.grade === null) {
      out.push(['', 'The test could not compare idle and loaded latency: too few probes were ' +
        'answered. Check the connection and run it again.']);
      return out;
    }
    const dirs = [];
    if (a.download && a.download.induced_ns !== null) {
      dirs.push({ name: 'download', inc: a.download.induced_ns, rate: a.download_mbps });
    }
    if (a.upload && a.upload.induced_ns !== null) {
      dirs.push({ name: 'upload', inc: a.upload.induced_ns, rate: a.upload_mbps });
    }
    dirs.sort(function (x, y) { return y.inc - x.inc; });
    const bad = dirs.filter(function (d) { return d.inc >= fixAt; });
    for (const d of bad) {
      const target = d.rate ? ' (about ' + fmtMbps(d.rate * 0.9) + ' Mbit/s)' : '';
      out.push(['fix', 'Your ' + d.name + ' queue adds ' + fmtMs(d.inc) + '. Set your router\'s SQM ' +
        '(cake or fq_codel) ' + d.name + ' rate to about 90 % of the measured ' + d.name + target +
        ', then run this test again.']);
    }
    if (bad.length === 0 && a.increase_ns >= fixAt) {
      out.push(['fix', 'Latency rises by ' + fmtMs(a.increase_ns) + ' under load, most ' +
        'when both directions are busy. Set your router\'s SQM (cake or fq_codel) download and ' +
        'upload rates to about 90 % of the measured ones.']);
    }
    if (out.length === 0) {
      out.push(['', 'Latency stays low under load (it rises by ' + fmtMs(a.increase_ns) +
        ' at most): your connection keeps its queues short. Nothing to fix.']);
    }
    const probes = a.rows.reduce(function (n, r) { return n + r.probes; }, 0);
    const lost = a.rows.reduce(function (n, r) { return n + r.lost; }, 0);
    if (probes > 0 && lost / probes > 0.05) {
      out.push(['', Math.round(100 * lost / probes) + ' % of the latency probes got no answer ' +
        'within ' + PROBE_TIMEOUT_MS / 1000 + ' s; the figures above count only the answered ones.']);
    }
    return out;
  }

  function render(a, lines) {
    $('result').hidden = false;
    const g = $('grade');
    g.textContent = a.grade || '–';
    g.className = 'grade' + (a.grade ? ' g-' + a.grade.replace('+', 'plus') : '');
    const bounds = P.grade.below_ms.map(function (r) { return r[0] + ' < ' + r[1]; }).join(', ');
    $('grade-line').textContent = a.grade === null ? 'No grade.' :
      'Latency under load rose ' + fmtMs(a.increase_ns) + ' over idle (' +
      fmtMs(a.idle.median_ns) + ' median) in the ' + a.grade_phase + ' phase, the worst ' +
      'loaded phase, which sets the grade. ' +
      'Grades: ' + bounds + ' ms, else ' + P.grade.otherwise + '.';
    $('capacity').textContent = 'Measured: ↓ ' + fmtMbps(a.download_mbps) + ' Mbit/s, ↑ ' +
      fmtMbps(a.upload_mbps) + ' Mbit/s.';
    const v = $('verdict');
    v.textContent = '';
    for (const line of lines) {
      const p = document.createElement('p');
      p.className = line[0];
      p.textContent = line[1];
      v.appendChild(p);
    }
    const body = $('rows');
    body.textContent = '';
    for (const r of a.rows) {
      const tr = document.createElement('tr');
      const cells = [
        r.name === 'bidirectional' ? 'both' : r.name,
        fmtMs(r.median_ns), fmtMs(r.p90_ns),
        r.kind === 'idle' ? '' : (r.induced_ns === null ? '–' : '+' + fmtMs(r.induced_ns)),
        r.probe_rpm === null ? '–' : r.probe_rpm.toFixed(0),
        fmtMbps(r.download_mbps), fmtMbps(r.upload_mbps),
        r.probes + ' (' + r.lost + ')',
      ];
      for (const c of cells) {
        const td = document.createElement('td');
        td.textContent = c;
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    const timing = run.probes.filter(function (p) { return p.timing === 'resource'; }).length;
    $('method').textContent = 'Each probe is one HTTP GET of a 1-byte object on a connection ' +
      'of its own; ' + timing + ' of ' + run.probes.length + ' round trips come from the browser\'s ' +
      'Resource Timing (request sent to first byte), the rest from fetch(). Probe RPM is 60000 ' +
      'divided by the trimmed mean of a phase\'s probe round trips in ms (the largest ' +
      Math.round(P.rpm_trim_fraction * 100) + ' % dropped), not the responsiveness draft\'s RPM. ' +
      'Timer resolution: ' + (window.crossOriginIsolated ? 'fine (cross-origin isolated)' : 'coarse') + '.';
  }

  function resultJson(a, lines) {
    const page = new URL(location.href);
    page.searchParams.delete('key');
    return {
      kind: 'bloatlab-browser-test',
      version: 1,
      test_id: run.test.id,
      started: run.started,
      page: page.href,
      user_agent: navigator.userAgent,
      cross_origin_isolated: !!window.crossOriginIsolated,
      duration_s: run.seconds,
      probe_interval_ms: P.probe_interval_ms,
      grade_table: P.grade,
      grade: a.grade,
      induced_ms: ms(a.increase_ns),
      grade_phase: a.grade_phase,
      capacity_mbps: { download: a.download_mbps, upload: a.upload_mbps },
      verdict: lines.map(function (l) { return l[1]; }),
      phases: a.rows.map(function (r) {
        return {
          name: r.name, kind: r.kind, start_ms: r.start_ms, end_ms: r.end_ms,
          down_streams: r.down_streams, up_streams: r.up_streams,
          probes: r.probes, lost: r.lost,
          median_ms: ms(r.median_ns), p90_ms: ms(r.p90_ns), induced_ms: ms(r.induced_ns),
          probe_rpm: r.probe_rpm, download_mbps: r.download_mbps, upload_mbps: r.upload_mbps,
        };
      }),
      probes: run.probes.map(function (p) {
        return { t_ms: p.t, rtt_ms: ms(rttOf(p)), timing: p.timing || (p.lost ? null : 'fetch') };
      }),
      throughput: run.samples.map(function (s) {
        return { t_ms: s.t, down_bytes: s.down, up_bytes: s.up };
      }),
      load_errors: run.errors,
    };
  }

  function save() {
    if (!api.result) {
      return;
    }
    const blob = new Blob([JSON.stringify(api.result, null, 2) + '\n'], { type: 'application/json' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = 'bloatlab-browser-' + api.result.started.replace(/[:.]/g, '-') + '.json';
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(a.href); }, 1000);
  }

  // ---- the server's record ----

  // Asks the server for a test id and token; a refusal (a cap) comes back
  // as its text, shown to the user.
  async function begin(seconds) {
    let r;
    try {
      r = await fetch(url(P.urls.start, { duration: seconds }), { method: 'POST', cache: 'no-store' });
    } catch (e) {
      return { error: 'Could not reach the server to start the test: ' + e.message };
    }
    const text = await r.text();
    if (!r.ok) {
      return { error: 'The server did not start the test (HTTP ' + r.status + '): ' + text.trim().slice(0, 300) };
    }
    try {
      return { ticket: JSON.parse(text) };
    } catch (e) {
      return { error: 'The server\'s answer to the start is not JSON.' };
    }
  }

  // Posts the result with the test's token; the server keeps it (with
  // --results-dir) and answers its URL.
  async function submit() {
    const t = run.test;
    try {
      const r = await fetch(url(P.urls.result, { id: t.id }), {
        method: 'POST', cache: 'no-store',
        headers: { 'content-type': 'application/json', 'x-bloatlab-test-token': t.token },
        body: JSON.stringify(api.result),
      });
      const text = await r.text();
      if (!r.ok) {
        return { error: 'The server did not keep this result (HTTP ' + r.status + '): ' + text.trim().slice(0, 300) };
      }
      return { url: JSON.parse(text).url || null };
    } catch (e) {
      return { error: 'Could not send the result to the server: ' + e.message };
    }
  }

  // ---- the run ----

  async function start() {
    const d = parseDuration();
    if (d.error) {
      fail(d.error);
      return;
    }
    $('start').disabled = true;
    $('save').disabled = true;
    $('result').hidden = true;
    $('record').hidden = true;
    api.result = null;
    api.error = null;
    api.resultUrl = null;
    api.submitError = null;
    setState('starting');
    say('Asking the server to start a test…');
    const b = await begin(d.seconds);
    if (b.error) {
      fail(b.error);
      return;
    }
    setState('running');
    say('Testing… keep this tab open and the connection otherwise quiet.');
    run = {
      id: b.ticket.id, test: b.ticket, seconds: d.seconds, plan: schedule(d.seconds), started: new Date().toISOString(),
      t0: performance.now(), probes: [], byUrl: new Map(), nextProbe: 0, samples: [],
      bytes: { down: 0, up: 0 }, errors: { down: 0, up: 0 }, loads: [], stopped: false,
      uploadBody: new Blob([new Uint8Array(P.upload_bytes)]),
    };
    run.samples.push({ t: 0, down: 0, up: 0 });
    probeLoop();
    const ticker = setInterval(tick, TICK_MS);
    for (const ph of run.plan.phases) {
      await sleep(Math.max(0, ph.start - (performance.now() - run.t0)));
      if (run.stopped) {
        break;
      }
      const load = ph.kind === 'loaded' ? startLoad(ph) : null;
      await sleep(Math.max(0, ph.end - (performance.now() - run.t0)));
      if (load) {
        load.abort();
      }
      tick();
    }
    const until = performance.now() + GRACE_MS;
    while (run.probes.some(function (p) { return !p.done; }) && performance.now() < until) {
      await sleep(50);
    }
    clearInterval(ticker);
    if (api.state === 'error') {
      return;
    }
    for (const p of run.probes) {
      if (!p.done) {
        p.lost = true;
      }
    }
    // Timing entries of the last probes arrive a moment after them.
    await sleep(100);
    onTiming({ getEntries: function () { return performance.getEntriesByType('resource'); } });
    run.stopped = true;
    tick();
    const a = analyse();
    const lines = verdict(a);
    render(a, lines);
    api.result = resultJson(a, lines);
    say('Done. ' + (a.grade ? 'Grade ' + a.grade + '.' : 'No grade.') + ' Sending the result to the server…');
    const sent = await submit();
    api.resultUrl = sent.url || null;
    api.submitError = sent.error || null;
    if (sent.url) {
      const link = $('result-link');
      link.href = sent.url;
      link.textContent = location.origin + sent.url;
      $('record').hidden = false;
    }
    say('Done. ' + (a.grade ? 'Grade ' + a.grade + '.' : 'No grade.') + (sent.error ? ' ' + sent.error : ''),
      !!sent.error);
    $('start').disabled = false;
    $('save').disabled = false;
    $('start').textContent = 'Run again';
    setState('done');
  }

  async function init() {
    $('start').addEventListener('click', start);
    $('save').addEventListener('click', save);
    window.addEventListener('resize', draw);
    if (window.PerformanceObserver) {
      new PerformanceObserver(onTiming).observe({ type: 'resource' });
      performance.setResourceTimingBufferSize(100000);
    }
    try {
      const r = await fetch(url('/api/v1/browser'), { cache: 'no-store' });
      if (!r.ok) {
        throw new Error('HTTP ' + r.status + ' ' + (await r.text()).trim());
      }
      P = await r.json();
    } catch (e) {
      fail('Could not load the test\'s parameters from the server: ' + e.message);
      return;
    }
    const d = parseDuration();
    const auto = parseAutostart();
    if (d.error || auto.error) {
      fail(d.error || auto.error);
      $('start').disabled = true;
      return;
    }
    const total = schedule(d.seconds).end / 1000;
    say('Ready: about ' + Math.ceil(total + GRACE_MS / 1000) + ' s (' + d.seconds +
      ' s per loaded phase). Stop other downloads and video first.');
    setState('ready');
    $('start').disabled = false;
    draw();
    if (auto.on) {
      start();
    }
  }

  init();
})();
