// crfhead lab: vanilla JavaScript drawing plain SVG. No framework, no build step, nothing fetched
// from outside the server that serves this file. Each tab reads data/<tab>.json (the payloads
// written by scripts/lab_payloads.py); a tab whose payload is missing says so instead of drawing.
// Every colour comes with a second cue: a marker shape, a dash pattern or a written label.
'use strict';

(function () {
  const SVGNS = 'http://www.w3.org/2000/svg';
  const PALETTE = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000'];
  const DASHES = ['', '7 4', '2 3', '10 3 2 3', '1 3', '5 2 1 2 1 2'];
  const SHAPES = ['circle', 'square', 'triangle', 'diamond', 'cross', 'plus'];

  // ------------------------------------------------------------------------- DOM helpers
  function build(ns, tag, attrs, children) {
    const node = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'on') {
        for (const [ev, fn] of Object.entries(value)) node.addEventListener(ev, fn);
      } else if (key === 'text') {
        node.textContent = String(value);
      } else if (key === 'dataset') {
        for (const [dk, dv] of Object.entries(value)) node.dataset[dk] = String(dv);
      } else if (key === 'class' && !ns) {
        node.className = value;
      } else if (value === true) {
        node.setAttribute(key, '');
      } else {
        node.setAttribute(key, String(value));
      }
    }
    for (const child of [].concat(children || [])) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === 'string' || typeof child === 'number' ? String(child) : child);
    }
    return node;
  }
  const h = (tag, attrs, children) => build(null, tag, attrs, children);
  const s = (tag, attrs, children) => build(SVGNS, tag, attrs, children);

  function fmt(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return '–';
    return Number(v).toFixed(digits === undefined ? 3 : digits);
  }
  // A probability-like cell value: exactly 1 prints "1"; a value that rounds to 1 does not.
  function cellText(v) {
    if (v === 1) return '1';
    const t = v.toFixed(3);
    return t === '1.000' ? '>.999' : t.replace(/^0\./, '.');
  }
  function big(v) {
    if (v === null || v === undefined) return '–';
    return Math.abs(v) >= 1000 ? Math.round(v).toLocaleString('en-US') : fmt(v, Math.abs(v) >= 100 ? 1 : 3);
  }
  // Sequential blue: lightness carries the value, so it reads in grey too.
  function heat(v) {
    const x = Math.max(0, Math.min(1, v));
    return `hsl(212, ${45 + 35 * x}%, ${97 - 72 * x}%)`;
  }

  function marker(shape, x, y, r, color, filled, extra) {
    const attrs = Object.assign({
      class: 'marker', stroke: color, 'stroke-width': 1.8, fill: filled ? color : '#ffffff',
    }, extra || {});
    switch (shape) {
      case 'square':
        return s('rect', Object.assign(attrs, { x: x - r, y: y - r, width: 2 * r, height: 2 * r }));
      case 'triangle':
        return s('path', Object.assign(attrs, { d: `M${x},${y - r * 1.2}L${x + r * 1.1},${y + r * 0.8}L${x - r * 1.1},${y + r * 0.8}Z` }));
      case 'diamond':
        return s('path', Object.assign(attrs, { d: `M${x},${y - r * 1.3}L${x + r * 1.1},${y}L${x},${y + r * 1.3}L${x - r * 1.1},${y}Z` }));
      case 'cross':
        return s('path', Object.assign(attrs, { d: `M${x - r},${y - r}L${x + r},${y + r}M${x - r},${y + r}L${x + r},${y - r}`, 'stroke-width': 2.4 }));
      case 'plus':
        return s('path', Object.assign(attrs, { d: `M${x - r},${y}L${x + r},${y}M${x},${y - r}L${x},${y + r}`, 'stroke-width': 2.4 }));
      default:
        return s('circle', Object.assign(attrs, { cx: x, cy: y, r: r }));
    }
  }
  function legendKey(label, opts) {
    const sv = s('svg', { width: 34, height: 16, 'aria-hidden': 'true' }, [
      opts.line === false ? null : s('line', {
        x1: 1, y1: 8, x2: 33, y2: 8, stroke: opts.color, 'stroke-width': opts.width || 2.2,
        'stroke-dasharray': opts.dash || null,
      }),
      opts.shape ? marker(opts.shape, 17, 8, 4, opts.color, opts.filled) : null,
      opts.swatch ? s('rect', Object.assign({ x: 4, y: 1, width: 26, height: 14, fill: opts.swatch, stroke: '#555' }, opts.swatchAttrs || {})) : null,
    ]);
    return h('span', { class: 'key' }, [sv, label]);
  }

  // ------------------------------------------------------------------------- scales and axes
  function linear(d0, d1, r0, r1) {
    const f = (v) => r0 + ((v - d0) / (d1 - d0 || 1)) * (r1 - r0);
    f.ticks = (n) => niceTicks(d0, d1, n || 5);
    return f;
  }
  function logScale(d0, d1, r0, r1) {
    const l0 = Math.log10(d0), l1 = Math.log10(d1);
    const f = (v) => r0 + ((Math.log10(v) - l0) / (l1 - l0 || 1)) * (r1 - r0);
    f.ticks = () => {
      const out = [];
      for (let e = Math.floor(l0); e <= Math.ceil(l1); e++) {
        for (const m of [1, 2, 5]) {
          const v = m * Math.pow(10, e);
          if (v >= d0 * 0.999 && v <= d1 * 1.001) out.push(v);
        }
      }
      return out.length >= 2 ? out : [d0, d1];
    };
    return f;
  }
  function niceTicks(lo, hi, n) {
    const span = hi - lo || 1;
    const step0 = Math.pow(10, Math.floor(Math.log10(span / n)));
    const err = (span / n) / step0;
    const step = step0 * (err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(10));
    return out;
  }
  function tickText(v) {
    if (Math.abs(v) >= 1000) return v.toLocaleString('en-US');
    if (Number.isInteger(v)) return String(v);
    return String(+v.toPrecision(3));
  }

  // A line chart: series of [x, y] points, each with its own colour, dash and marker shape,
  // labelled at its last point. opts: width, height, xLog, yLog, xLabel, yLabel, yDomain, xTicks.
  function lineChart(series, opts) {
    const W = opts.width || 560, H = opts.height || 340;
    const m = { l: 62, r: opts.right || 150, t: 16, b: 48 };
    const xs = series.flatMap((ser) => ser.points.map((p) => p[0]));
    const ys = series.flatMap((ser) => ser.points.map((p) => p[1])).filter((v) => v !== null && Number.isFinite(v));
    let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
    let [y0, y1] = opts.yDomain || [Math.min(...ys), Math.max(...ys)];
    if (!opts.yDomain) {
      if (opts.yLog) { y0 /= 1.4; y1 *= 1.4; } else { const pad = (y1 - y0) * 0.08 || 0.01; y0 -= pad; y1 += pad; }
    }
    if (opts.xLog) { x0 /= 1.15; x1 *= 1.15; } else { const pad = (x1 - x0) * 0.04 || 1; x0 -= pad; x1 += pad; }
    const X = (opts.xLog ? logScale : linear)(x0, x1, m.l, W - m.r);
    const Y = (opts.yLog ? logScale : linear)(y0, y1, H - m.b, m.t);
    const svg = s('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': opts.aria || opts.yLabel, class: 'chart' });
    const grid = s('g', { class: 'grid' });
    const axes = s('g', { class: 'axis' });
    const yt = Y.ticks(5);
    for (const v of yt) {
      grid.append(s('line', { x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v) }));
      axes.append(s('text', { x: m.l - 6, y: Y(v) + 4, 'text-anchor': 'end', 'font-size': 11.5, text: tickText(v) }));
    }
    const xt = opts.xTicks || X.ticks(6);
    for (const v of xt) {
      grid.append(s('line', { y1: m.t, y2: H - m.b, x1: X(v), x2: X(v) }));
      axes.append(s('text', { x: X(v), y: H - m.b + 16, 'text-anchor': 'middle', 'font-size': 11.5, text: tickText(v) }));
    }
    axes.append(s('path', { d: `M${m.l},${m.t}V${H - m.b}H${W - m.r}`, fill: 'none' }));
    axes.append(s('text', { x: (m.l + W - m.r) / 2, y: H - 8, 'text-anchor': 'middle', 'font-size': 12.5, text: opts.xLabel }));
    axes.append(s('text', { x: 14, y: (m.t + H - m.b) / 2, 'text-anchor': 'middle', 'font-size': 12.5, transform: `rotate(-90 14 ${(m.t + H - m.b) / 2})`, text: opts.yLabel }));
    svg.append(grid, axes);
    const ends = [];
    series.forEach((ser, i) => {
      const color = ser.color || PALETTE[i % PALETTE.length];
      const dash = ser.dash !== undefined ? ser.dash : DASHES[i % DASHES.length];
      const shape = ser.shape || SHAPES[i % SHAPES.length];
      const pts = ser.points.filter((p) => p[1] !== null && Number.isFinite(p[1]));
      if (!pts.length) return;
      const g = s('g', { class: 'series', dataset: { series: ser.key } });
      g.append(s('path', { d: pts.map((p, j) => `${j ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(''), fill: 'none', stroke: color, 'stroke-width': 2.2, 'stroke-dasharray': dash || null }));
      for (const p of pts) {
        const mk = marker(shape, X(p[0]), Y(p[1]), 4.2, color, ser.filled !== false);
        mk.append(s('title', { text: `${ser.label}: ${tickText(p[0])} → ${fmt(p[1], 4)}` }));
        g.append(mk);
      }
      svg.append(g);
      const last = pts[pts.length - 1];
      ends.push({ y: Y(last[1]), label: ser.label, color, x: X(last[0]) });
    });
    // Direct labels at the right, pushed apart so they never overlap.
    ends.sort((a, b) => a.y - b.y);
    for (let i = 1; i < ends.length; i++) ends[i].y = Math.max(ends[i].y, ends[i - 1].y + 14);
    for (const e of ends) {
      svg.append(s('text', { x: W - m.r + 10, y: e.y + 4, 'font-size': 12, text: e.label, fill: e.color, 'font-weight': 600 }));
    }
    if (opts.decorate) opts.decorate(svg, X, Y, m, W, H);
    return svg;
  }

  // ------------------------------------------------------------------------- the trellis
  // rows: state names (K), cols: column labels (T), values: T x K. paths: [{key, path (state per
  // column), color, dash, shape, dy}], gold: state per column or null. Returns {svg, setValues, select}.
  function trellis(opts) {
    const K = opts.rows.length, T = opts.cols.length;
    const labelW = opts.labelWidth || 40;
    const cw = opts.cellWidth || Math.max(22, Math.min(46, Math.floor(((opts.maxWidth || 1160) - labelW - 10) / T)));
    const ch = opts.cellHeight || 38;
    const top = opts.top || 34;
    const W = labelW + T * cw + 10, H = top + K * ch + 10;
    const svg = s('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: 'trellis', role: 'img', 'aria-label': opts.aria || 'trellis' });
    const cx = (t) => labelW + t * cw + cw / 2;
    const cy = (k) => top + k * ch + ch / 2;
    const cells = [];
    const showText = cw >= 30;
    for (let t = 0; t < T; t++) {
      const colLabel = opts.cols[t];
      if (opts.rotateCols) {
        svg.append(s('text', { x: cx(t), y: top - 6, 'font-size': 11, 'text-anchor': 'start', transform: `rotate(-35 ${cx(t)} ${top - 6})`, text: colLabel }));
      } else {
        svg.append(s('text', { x: cx(t), y: top - 8, 'font-size': 11, 'text-anchor': 'middle', text: colLabel }));
      }
    }
    for (let k = 0; k < K; k++) {
      svg.append(s('text', { x: labelW - 6, y: cy(k) + 4, 'font-size': 11.5, 'text-anchor': 'end', text: opts.rows[k] }));
    }
    const cellLayer = s('g', { class: 'cells' });
    for (let t = 0; t < T; t++) {
      const col = [];
      for (let k = 0; k < K; k++) {
        const rect = s('rect', { x: labelW + t * cw + 0.5, y: top + k * ch + 0.5, width: cw - 1, height: ch - 1, class: 'cell', dataset: { t, k } });
        const title = s('title');
        rect.append(title);
        const txt = showText ? s('text', { x: cx(t), y: cy(k) + 4, 'text-anchor': 'middle', class: 'cell-value', dataset: { t, k } }) : null;
        if (opts.onSelect) rect.addEventListener('click', () => opts.onSelect(t));
        cellLayer.append(rect);
        if (txt) cellLayer.append(txt);
        col.push({ rect, txt, title });
      }
      cells.push(col);
    }
    svg.append(cellLayer);
    if (opts.gold) {
      const g = s('g', { class: 'gold' });
      opts.gold.forEach((k, t) => {
        if (k === null || k < 0) return;
        g.append(s('rect', { x: labelW + t * cw + 2.5, y: top + k * ch + 2.5, width: cw - 5, height: ch - 5, fill: 'none', stroke: '#7a4b00', 'stroke-width': 2, 'stroke-dasharray': '3 2', class: 'marker' }));
        g.append(marker('diamond', labelW + t * cw + cw - 7, top + k * ch + 8, 3.6, '#7a4b00', false, { dataset: { t, k } }));
      });
      svg.append(g);
    }
    for (const p of opts.paths || []) {
      const g = s('g', { class: `path path-${p.key}`, dataset: { path: p.key } });
      const pts = p.path.map((k, t) => [cx(t), cy(k) + (p.dy || 0)]);
      g.append(s('path', { class: 'path-line', d: pts.map((q, j) => `${j ? 'L' : 'M'}${q[0]},${q[1]}`).join(''), stroke: p.color, 'stroke-width': 2.2, 'stroke-dasharray': p.dash || null, 'stroke-opacity': 0.9 }));
      pts.forEach((q, t) => g.append(marker(p.shape, q[0], q[1], 3.4, p.color, p.filled !== false, { dataset: { t, k: p.path[t] } })));
      svg.append(g);
    }
    const highlight = s('rect', { class: 'column-highlight', y: top - 2, height: K * ch + 4, width: cw + 2, x: -100 });
    svg.append(highlight);

    function setValues(values, describe) {
      for (let t = 0; t < T; t++) {
        for (let k = 0; k < K; k++) {
          const v = values[t][k];
          const c = cells[t][k];
          c.rect.setAttribute('fill', heat(v));
          c.rect.dataset.value = String(v);
          c.title.textContent = describe ? describe(t, k, v) : `t = ${t}, ${opts.rows[k]}: ${v}`;
          if (c.txt) {
            c.txt.textContent = cellText(v);
            c.txt.dataset.value = String(v);
            c.txt.classList.toggle('light', v > 0.55);
          }
        }
      }
    }
    function select(t) {
      highlight.setAttribute('x', labelW + t * cw - 1);
      svg.dataset.selected = String(t);
    }
    return { svg, setValues, select };
  }

  const PATH_STYLES = {
    viterbi: { key: 'viterbi', label: 'Viterbi path (max, ×)', color: '#c0392b', dash: '', shape: 'circle', dy: -11 },
    posterior: { key: 'posterior', label: 'posterior-marginal path (+, ×)', color: '#111111', dash: '5 3', shape: 'square', dy: 11, filled: false },
  };
  function trellisLegend(withGold, extra) {
    const keys = [
      legendKey(PATH_STYLES.viterbi.label, { color: PATH_STYLES.viterbi.color, shape: 'circle', filled: true }),
      PATH_STYLES.posterior ? legendKey(PATH_STYLES.posterior.label, { color: PATH_STYLES.posterior.color, shape: 'square', dash: '5 3', filled: false }) : null,
      withGold ? legendKey('gold state (dotted box ◇)', { color: '#7a4b00', shape: 'diamond', line: false, filled: false }) : null,
      legendKey('darker cell = larger value (the number is written in it)', { swatch: heat(0.8), line: false }),
    ].concat(extra || []);
    return h('div', { class: 'legend' }, keys);
  }

  // ------------------------------------------------------------------------- common tab pieces
  function heading(panel, data, fallback) {
    panel.append(h('h2', { text: (data && data.title) || fallback }));
    if (data && data.note) panel.append(h('p', { class: 'note', text: data.note }));
  }
  function stat(label, value, id) {
    return h('div', { class: 'stat' }, [h('div', { class: 'label', text: label }), h('div', { class: 'value', id, text: value })]);
  }
  function radioGroup(name, legend, options, current, onChange) {
    return h('fieldset', {}, [h('legend', { text: legend })].concat(options.map((o) => h('label', {}, [
      h('input', { type: 'radio', name, value: o.value, checked: o.value === current, dataset: { control: name }, on: { change: (e) => { if (e.target.checked) onChange(o.value); } } }),
      ' ', o.label,
    ]))));
  }
  function missing(panel, tab, title) {
    panel.dataset.state = 'missing';
    panel.append(h('h2', { text: title }), h('div', { class: 'notice payload-missing', role: 'status' }, [
      h('strong', { text: 'payload missing' }),
      `This tab draws data/${tab}.json, which is not there yet. Write it with `, h('code', { text: `python scripts/lab_payloads.py --only ${tab}` }), ' and reload.',
    ]));
  }
  function failed(panel, title, err) {
    panel.dataset.state = 'error';
    panel.append(h('h2', { text: title }), h('div', { class: 'notice error', role: 'alert' }, [
      h('strong', { text: 'this figure could not be drawn' }), String(err && err.message ? err.message : err),
    ]));
  }
  function table(headers, rows, opts) {
    const o = opts || {};
    return h('table', { class: `data ${o.class || ''}`, id: o.id }, [
      o.caption ? h('caption', { text: o.caption }) : null,
      h('thead', {}, h('tr', {}, headers.map((c, i) => h('th', { class: (o.textCols || [0]).includes(i) ? 'text' : null, scope: 'col', text: c })))),
      h('tbody', {}, rows.map((r) => h('tr', { class: r.marked ? 'marked' : null, dataset: r.dataset || {} }, (r.cells || r).map((c, i) => h('td', { class: (o.textCols || [0]).includes(i) ? 'text' : null }, [c]))))),
    ]);
  }

  // ------------------------------------------------------------------------- Trellis tab
  function renderTrellis(panel, d) {
    heading(panel, d, 'Trellis: one recursion, two semirings');
    const T = d.marginals.length, K = d.marginals[0].length;
    const states = Array.from({ length: K }, (_, k) => `s${k}`);
    let semiring = 'sum';
    let current = d.disagree_at && d.disagree_at.length ? d.disagree_at[0] : 0;
    const values = () => (semiring === 'sum' ? d.marginals : d.max_marginals_relative);
    const describe = (t, k, v) => semiring === 'sum'
      ? `t = ${t}, state s${k}: marginal γ = ${v}`
      : `t = ${t}, state s${k}: best path through it / best path = ${v}`;
    const tr = trellis({
      rows: states, cols: Array.from({ length: T }, (_, t) => String(t)), gold: d.gold,
      paths: [Object.assign({ path: d.viterbi }, PATH_STYLES.viterbi), Object.assign({ path: d.posterior }, PATH_STYLES.posterior)],
      onSelect: (t) => setPosition(t), aria: 'trellis of 8 states by 24 positions',
    });
    tr.svg.id = 'trellis-svg';
    const caption = h('p', { class: 'note', id: 'trellis-caption' });
    const picker = h('input', { type: 'range', min: 0, max: T - 1, step: 1, value: current, id: 'position', 'aria-label': 'position t', on: { input: (e) => setPosition(Number(e.target.value)) } });
    const posOut = h('output', { id: 'position-value', for: 'position' });
    const colBody = h('tbody');
    const colTable = h('table', { class: 'data', id: 'column-values' }, [
      h('caption', { id: 'column-caption' }),
      h('thead', {}, h('tr', {}, [h('th', { class: 'text', text: 'state' }), h('th', { text: 'value' }), h('th', { class: 'text', text: '' }), h('th', { class: 'text', text: 'on path' })])),
      colBody,
    ]);
    const controls = h('div', { class: 'controls' }, [
      radioGroup('semiring', 'semiring', [
        { value: 'sum', label: '(+, ×): marginal γₜ(k)' },
        { value: 'max', label: '(max, ×): max-marginal ÷ best path' },
      ], semiring, (v) => { semiring = v; refresh(); }),
      h('div', { class: 'picker' }, [
        h('label', { for: 'position', text: 'position' }),
        h('button', { type: 'button', 'aria-label': 'previous position', text: '◀', on: { click: () => setPosition(current - 1) } }),
        picker,
        h('button', { type: 'button', 'aria-label': 'next position', text: '▶', on: { click: () => setPosition(current + 1) } }),
        posOut,
      ]),
    ]);
    panel.append(controls, trellisLegend(true), h('div', { class: 'row' }, [h('div', { class: 'figure' }, tr.svg)]),
      h('div', { class: 'row' }, [
        h('div', { class: 'column-panel' }, colTable),
        h('div', {}, [
          h('div', { class: 'stats' }, [
            stat('Viterbi, tags right', `${d.correct_viterbi} / ${T}`, 'correct-viterbi'),
            stat('posterior decoding, tags right', `${d.correct_posterior} / ${T}`, 'correct-posterior'),
            stat('expected tags right (Viterbi / posterior)', `${fmt(d.expected_correct_viterbi)} / ${fmt(d.expected_correct_posterior)}`, 'expected-correct'),
            stat('probability of the best path', String(d.best_path_probability), 'best-path-probability'),
          ]),
          caption,
          h('p', { class: 'note', text: `The two decoders disagree at ${d.disagree_at.length === 1 ? 'position' : 'positions'} t = ${d.disagree_at.join(', ')} (counting from 0). World: ${d.world}, seed ${d.seed}, draw ${d.draw}.` }),
        ]),
      ]));

    function setPosition(t) {
      current = Math.max(0, Math.min(T - 1, t));
      picker.value = String(current);
      posOut.textContent = `t = ${current}`;
      tr.select(current);
      const col = values()[current];
      const best = col.indexOf(Math.max(...col));
      colBody.replaceChildren(...col.map((v, k) => {
        const on = [];
        if (d.viterbi[current] === k) on.push('Viterbi ●');
        if (d.posterior[current] === k) on.push('posterior ■');
        if (d.gold[current] === k) on.push('gold ◇');
        return h('tr', { class: k === best ? 'marked' : null, dataset: { k } }, [
          h('td', { class: 'text', text: `s${k}` }),
          h('td', { class: 'value', text: v === 1 ? '1' : v.toFixed(3), dataset: { value: v } }),
          h('td', { class: 'text' }, h('span', { class: 'bar', style: `width:${Math.round(80 * v)}px` })),
          h('td', { class: 'text', text: on.join(' ') }),
        ]);
      }));
      document.getElementById('column-caption') && (document.getElementById('column-caption').textContent =
        `column t = ${current}: ${semiring === 'sum' ? 'marginals γₜ(k) (sum to 1)' : 'max-marginals relative to the best path (1 on the Viterbi state)'}`);
    }
    function refresh() {
      tr.setValues(values(), describe);
      tr.svg.dataset.semiring = semiring;
      caption.textContent = semiring === 'sum'
        ? 'Each cell is the marginal γₜ(k), the probability that the state at t is k. Posterior decoding takes each column\u2019s darkest cell (Theorem 4(b)).'
        : 'Each cell is the probability of the best path through (t, k) divided by the probability of the best path: exactly 1 along the Viterbi path, which takes each column\u2019s 1.';
      setPosition(current);
    }
    refresh();
    return tr.svg;
  }

  // ------------------------------------------------------------------------- Learning curves
  function renderLearningCurves(panel, d) {
    heading(panel, d, 'Learning curves');
    const metrics = d.metrics || [{ key: 'acc', label: 'accuracy' }, { key: 'loss', label: 'log-loss' }];
    let metric = metrics[0].key;
    const charts = h('div', { class: 'row', id: 'curves' });
    const tables = h('div', { class: 'row' });
    panel.append(h('div', { class: 'controls' }, [radioGroup('metric', 'y axis', metrics.map((m) => ({ value: m.key, label: m.label + (m.unit ? ` (${m.unit})` : '') })), metric, (v) => { metric = v; draw(); })]), charts, tables);
    function draw() {
      const mInfo = metrics.find((m) => m.key === metric);
      charts.replaceChildren();
      tables.replaceChildren();
      for (const w of d.worlds) {
        const byKey = w[metric] || {};
        const series = d.taggers.map((tg, i) => ({ key: tg.key, label: tg.label, color: PALETTE[i % PALETTE.length], dash: DASHES[i % DASHES.length], shape: SHAPES[i % SHAPES.length], points: byKey[tg.key] ? w.n.map((n, j) => [n, byKey[tg.key][j]]) : [] })).filter((sr) => sr.points.length);
        const svg = lineChart(series, { width: 575, height: 350, xLog: true, xTicks: w.n, xLabel: 'training sequences n (log scale)', yLabel: `${mInfo.label}${mInfo.unit ? ` (${mInfo.unit})` : ''}`, aria: `${w.label}: ${mInfo.label}` });
        svg.dataset.world = w.key;
        charts.append(h('figure', { class: 'figure', style: 'margin:0' }, [h('figcaption', {}, [h('strong', { text: w.label }), ` (${w.test_n} test sequences)`]), svg]));
        tables.append(table(['tagger'].concat(w.n.map((n) => `n = ${n}`)), series.map((sr) => [sr.label].concat(sr.points.map((p) => fmt(p[1])))), { caption: `${w.label}: ${mInfo.label}` }));
      }
    }
    draw();
    return charts;
  }

  // ------------------------------------------------------------------------- CRF vs MEMM
  function renderLabelBias(panel, d) {
    heading(panel, d, 'CRF vs MEMM: label bias');
    const models = d.models || [{ key: 'crf', label: 'CRF' }, { key: 'memm', label: 'MEMM' }];
    const fi = d.focus_index, focusLabel = d.focus_label, K = d.labels.length;
    const conts = d.continuations;
    // Grouped bars: p(tag of "the" = focus label) per continuation, one bar per model (pattern + label).
    const W = 1080, H = 300, m = { l: 60, r: 20, t: 20, b: 60 };
    const svg = s('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', id: 'label-bias-bars', 'aria-label': `probability that "${d.prefix[fi]}" is ${focusLabel}` });
    const defs = s('defs', {}, [s('pattern', { id: 'hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' }, [s('rect', { width: 6, height: 6, fill: '#f3d3c0' }), s('line', { x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#D55E00', 'stroke-width': 3 })])]);
    svg.append(defs);
    const Y = linear(0, 1, H - m.b, m.t);
    const axes = s('g', { class: 'axis' });
    for (const v of [0, 0.25, 0.5, 0.75, 1]) {
      axes.append(s('line', { x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v), stroke: '#e5e9ee' }));
      axes.append(s('text', { x: m.l - 6, y: Y(v) + 4, 'text-anchor': 'end', 'font-size': 11.5, text: String(v) }));
    }
    axes.append(s('text', { x: 14, y: (H - m.b + m.t) / 2, 'font-size': 12.5, 'text-anchor': 'middle', transform: `rotate(-90 14 ${(H - m.b + m.t) / 2})`, text: `p("${d.prefix[fi]}" = ${focusLabel})` }));
    svg.append(axes);
    const groupW = (W - m.l - m.r) / conts.length;
    const barW = Math.min(70, groupW / (models.length + 1));
    const fills = ['#0072B2', 'url(#hatch)'];
    conts.forEach((c, i) => {
      const gx = m.l + i * groupW + groupW / 2;
      models.forEach((md, j) => {
        const p = c[md.key].focus_probability;
        const x = gx + (j - models.length / 2) * barW + 2;
        svg.append(s('rect', { x, y: Y(p), width: barW - 4, height: Y(0) - Y(p), fill: fills[j % 2], stroke: j ? '#D55E00' : '#003f66', 'stroke-width': 1.2, class: 'bar', dataset: { model: md.key, continuation: i } }, [s('title', { text: `${md.label}, “… ${c.ending.join(' ')}”: ${p}` })]));
        svg.append(s('text', { x: x + (barW - 4) / 2, y: Y(p) - 5, 'text-anchor': 'middle', 'font-size': 11, text: fmt(p) }));
        svg.append(s('text', { x: x + (barW - 4) / 2, y: H - m.b + 14, 'text-anchor': 'middle', 'font-size': 10.5, text: md.key.toUpperCase() }));
      });
      svg.append(s('text', { x: gx, y: H - m.b + 32, 'text-anchor': 'middle', 'font-size': 12.5, 'font-weight': 600, text: `… the ${c.ending.join(' ')}` }));
    });
    panel.append(h('p', {}, [`Sentence: “${d.prefix.join(' ')} …” with ${conts.length} endings. Bars: the probability that “${d.prefix[fi]}” (token ${fi}) is ${focusLabel}.`]),
      h('div', { class: 'legend' }, models.map((md, j) => legendKey(`${md.label}${md.description ? ` — ${md.description}` : ''}`, { swatch: j ? '#f3d3c0' : '#0072B2', line: false, swatchAttrs: j ? { fill: 'url(#hatch)' } : {} }))),
      h('div', { class: 'figure' }, svg));
    if (d.summary) {
      const sm = d.summary;
      panel.append(h('div', { class: 'stats' }, [
        stat(`CRF: p(${focusLabel}) ranges`, `${fmt(sm.crf_min)} – ${fmt(sm.crf_max)}`, 'crf-range'),
        stat(`MEMM: the same under every ending? (float64 values within ${sm.memm_spread_bound})`, sm.memm_identical ? 'yes, to every printed digit' : 'no', 'memm-identical'),
        stat(`MEMM: p(${focusLabel})`, String(sm.memm_value), 'memm-value'),
        stat('Viterbi opens a date at “the” (CRF / MEMM)', `${sm.crf_viterbi_opens_date ? sm.crf_viterbi_opens_date.filter(Boolean).length : '–'} / ${(sm.memm_viterbi_opens_date || []).filter(Boolean).length} of ${conts.length} endings`, 'memm-opens'),
      ]));
    }
    // Token by token: each model's label and its marginal probability, for each ending.
    const rows = [];
    conts.forEach((c, i) => {
      models.forEach((md) => {
        const r = c[md.key];
        const cells = c.tokens.map((tok, t) => {
          const k = d.labels.indexOf(r.viterbi[t]);
          const p = k >= 0 ? r.marginals[t][k] : null;
          const unknown = (c.unknown_tokens || []).includes(t);
          return h('span', { class: `tok${t === fi ? ' focus' : ''}${unknown ? ' unknown' : ''}`, title: unknown ? 'read as the unknown word (never seen in training)' : null }, [h('span', { class: 'w', text: unknown ? `${tok}*` : tok }), h('span', { class: 'l', text: r.viterbi[t] }), h('span', { class: 'l', text: p === null ? '' : fmt(p) })]);
        });
        rows.push(h('div', { class: 'sentence', dataset: { continuation: i, model: md.key } }, [
          h('div', { class: 'lab', text: `${md.label}, ending “${c.ending.join(' ')}”${c.count_in_training !== undefined ? ` (seen after “the” ${c.count_in_training}× in training)` : ''}: Viterbi label and its marginal; “${d.prefix[fi]}”: p(${focusLabel}) = ${r.focus_probability}` }),
          h('div', { class: 'tokens' }, cells),
        ]));
      });
    });
    panel.append(h('h3', { text: 'Token by token' }), h('p', { class: 'note', text: 'Each box: the word, the model\u2019s Viterbi label, and the marginal probability of that label. A word marked * was never seen in training (read as the unknown word). The focus word is framed.' }), h('div', { id: 'label-bias-tokens' }, rows));
    void K;
    return svg;
  }

  // ------------------------------------------------------------------------- Perceptron
  function renderPerceptron(panel, d) {
    heading(panel, d, 'Perceptron: mistakes against the R²/γ² bound');
    const rows = d.margins.slice().sort((a, b) => a.gamma - b.gamma);
    const series = [
      { key: 'bound', label: 'bound R²/γ²', color: '#D55E00', dash: '7 4', shape: 'square', filled: false, points: rows.map((r) => [r.gamma, r.bound]) },
      { key: 'mistakes', label: 'mistakes', color: '#0072B2', dash: '', shape: 'circle', points: rows.map((r) => [r.gamma, Math.max(r.mistakes, 0.5)]) },
    ];
    const svg = lineChart(series, { width: 760, height: 380, xLog: true, yLog: true, xTicks: rows.map((r) => +r.gamma.toFixed(3)), xLabel: 'margin γ of the data (log scale)', yLabel: 'count (log scale)', aria: 'mistakes and bound against the margin', right: 120 });
    svg.id = 'perceptron-chart';
    panel.append(h('div', { class: 'legend' }, series.map((sr) => legendKey(sr.label, { color: sr.color, dash: sr.dash, shape: sr.shape, filled: sr.filled !== false }))), h('div', { class: 'figure' }, svg));
    panel.append(table(['target γ', 'γ', 'R', 'bound R²/γ²', 'mistakes', 'epochs', 'converged', 'bound ÷ mistakes'],
      d.margins.map((r) => [fmt(r.target_gamma), fmt(r.gamma), fmt(r.R), big(r.bound), String(r.mistakes), String(r.epochs), r.converged ? 'yes' : 'NO', r.looseness === null ? '–' : big(r.looseness)]),
      { caption: 'Theorem 5 at each margin: the bound holds when mistakes ≤ bound', textCols: [], id: 'perceptron-table' }));
    if (d.setup) {
      const st = d.setup;
      panel.append(h('p', { class: 'note', text: `Setup: ${st.num_tags} tags, ${st.vocab_size} words, length ${st.length}, ${st.n} training sequences per margin, ${st.features} features, seed ${st.seed}, at most ${st.max_epochs} epochs.` }));
    }
    return svg;
  }

  // ------------------------------------------------------------------------- Finance
  function renderFinance(panel, d) {
    heading(panel, d, 'Finance case study');
    const fields = [['accuracy', 'token accuracy'], ['f1', 'span F1'], ['unseen_accuracy', 'unseen-word accuracy'], ['unseen_rate', 'unseen rate']];
    const shown = fields.slice(0, 3);
    const head1 = h('tr', {}, [h('th', { class: 'text', rowspan: 2, scope: 'col', text: 'tagger' })].concat(d.docs.map((n) => h('th', { colspan: shown.length, scope: 'colgroup', text: `${n} training docs` }))));
    const head2 = h('tr', {}, d.docs.flatMap(() => shown.map((f) => h('th', { scope: 'col', text: f[1] }))));
    const body = d.taggers.map((tg) => h('tr', { dataset: { tagger: tg.key } }, [h('td', { class: 'text', text: tg.label })].concat(d.docs.flatMap((n) => {
      const c = (d.cells[tg.key] || []).find((x) => x.docs === n) || {};
      // Mean over the corpus runs, with its standard deviation where there were several.
      return shown.map((f) => h('td', { text: c.sd && d.runs > 1 ? `${fmt(c[f[0]])} ± ${fmt(c.sd[f[0]])}` : fmt(c[f[0]]), dataset: { field: f[0], docs: n } }));
    }))));
    const tbl = h('table', { class: 'data', id: 'finance-table' }, [h('caption', { text: `Test: ${d.test}. Unseen words: test tokens never seen in training.` }), h('thead', {}, [head1, head2]), h('tbody', {}, body)]);
    // A small chart beside the table: unseen-word accuracy by training size.
    const series = d.taggers.map((tg, i) => ({ key: tg.key, label: tg.label, color: PALETTE[i % PALETTE.length], dash: DASHES[i % DASHES.length], shape: SHAPES[i % SHAPES.length], points: (d.cells[tg.key] || []).map((c) => [c.docs, c.unseen_accuracy]) }));
    let metric = 'unseen_accuracy';
    const holder = h('div', { class: 'figure' });
    function draw() {
      const label = fields.find((f) => f[0] === metric)[1];
      series.forEach((sr) => { sr.points = (d.cells[sr.key] || []).map((c) => [c.docs, c[metric]]); });
      const svg = lineChart(series, { width: 620, height: 330, xLog: true, xTicks: d.docs, xLabel: 'training documents (log scale)', yLabel: label, aria: `finance: ${label}` });
      svg.id = 'finance-chart';
      holder.replaceChildren(svg);
    }
    panel.append(h('div', { class: 'figure' }, tbl), h('div', { class: 'controls' }, [radioGroup('finance-metric', 'chart', fields.slice(0, 3).map((f) => ({ value: f[0], label: f[1] })), metric, (v) => { metric = v; draw(); })]), holder);
    if (d.orderings && d.orderings.length) {
      panel.append(table(['the seed\'s claim', 'holds here', 'means'],
        d.orderings.map((o) => [o.claim, o.holds === null ? '–' : (o.holds ? 'yes' : 'no'), o.detail]),
        { caption: `The seed's orderings, checked on the means of ${d.runs} corpus runs (profile ${d.profile})`, textCols: [0, 1, 2], id: 'finance-orderings' }));
    }
    if (d.taggers.some((tg) => tg.config)) {
      panel.append(h('p', { class: 'note' }, ['Configs: '].concat(d.taggers.map((tg, i) => h('span', {}, [i ? ', ' : '', `${tg.label} `, h('code', { text: tg.config })])))));
    }
    draw();
    return tbl;
  }

  // ------------------------------------------------------------------------- Higher order
  function renderHigherOrder(panel, d) {
    heading(panel, d, 'Higher order: chain vs 2-slave decoding');
    const g = d.group || {};
    panel.append(h('p', {}, [`One group of ${g.size} tweets (${g.split} split, group ${g.index}), ${d.patterns} non-local patterns of weight ${d.pattern_weight}. Tokens where the 2-slave decoder changed the chain's labels are boxed with a dashed border.`]));
    const its = d.iterations;
    const hasBest = its.length && its[0].best_dual !== undefined;
    const series = [
      hasBest ? { key: 'dual_now', label: 'dual at the iteration', color: '#777777', dash: '2 3', shape: 'plus', points: its.map((r) => [r.iteration, r.dual]) } : null,
      { key: 'dual', label: 'dual bound', color: '#D55E00', dash: '7 4', shape: 'square', filled: false, points: its.map((r) => [r.iteration, hasBest ? r.best_dual : r.dual]) },
      { key: 'primal', label: 'best primal', color: '#0072B2', dash: '', shape: 'circle', points: its.map((r) => [r.iteration, r.best_primal]) },
    ].filter(Boolean);
    const svg = lineChart(series, {
      width: 800, height: 340, xLabel: 'iteration', yLabel: 'score (chains + patterns)', aria: 'dual bound and best primal per iteration', right: 160,
      decorate: (sv, X, Y, m, W, H) => {
        if (d.certificate_iteration) {
          const x = X(d.certificate_iteration);
          sv.append(s('line', { x1: x, x2: x, y1: m.t, y2: H - m.b, stroke: '#111', 'stroke-dasharray': '2 2' }));
          sv.append(s('text', { x: x - 4, y: m.t + 12, 'text-anchor': 'end', 'font-size': 12, text: `certificate at iteration ${d.certificate_iteration} ✓` }));
        }
      },
    });
    svg.id = 'higher-order-chart';
    panel.append(h('div', { class: 'legend' }, series.map((sr) => legendKey(sr.label, { color: sr.color, dash: sr.dash, shape: sr.shape, filled: sr.filled !== false }))), h('div', { class: 'figure' }, svg));
    panel.append(h('div', { class: 'stats' }, [
      stat('chain score', fmt(d.chain_score), 'chain-score'),
      stat('2-slave primal / dual', `${fmt(d.dd_primal)} / ${fmt(d.dd_dual)}`, 'dd-scores'),
      stat('certified optimal', d.certified ? `yes, iteration ${d.certificate_iteration}` : 'no (stopped at the limit)', 'certified'),
      stat('tokens changed', String((d.changed || []).length), 'changed-count'),
    ]));
    const sents = h('div', { id: 'higher-order-sentences' });
    d.sentences.forEach((sn, i) => {
      const changed = new Set(sn.changed);
      sents.append(h('div', { class: 'sentence', dataset: { sentence: i } }, [
        h('div', { class: 'lab', text: `tweet ${i + 1}: word / chain → 2-slave / gold` }),
        h('div', { class: 'tokens' }, sn.tokens.map((tok, t) => h('span', { class: `tok${changed.has(t) ? ' changed' : ''}`, title: changed.has(t) ? 'changed by the 2-slave decoder' : null }, [
          h('span', { class: 'w', text: tok }),
          h('span', { class: 'l', text: changed.has(t) ? `${sn.chain[t]} → ${sn.dd[t]}` : sn.dd[t] }),
          h('span', { class: 'l', text: `gold ${sn.gold[t]}${sn.dd[t] === sn.gold[t] ? ' ✓' : ' ✗'}` }),
        ]))),
      ]));
    });
    panel.append(h('h3', { text: 'The group' }), sents);
    if ((d.changed || []).length) {
      panel.append(table(['tweet', 'position', 'token', 'chain', '2-slave', 'gold'], d.changed.map((c) => [String(c.sentence + 1), String(c.position), c.token, c.chain, c.dd, c.gold]), { caption: 'Changed tokens', textCols: [2, 3, 4, 5], id: 'changed-table' }));
    }
    return svg;
  }

  // ------------------------------------------------------------------------- Your model
  // The text with its entities marked, displaCy style: type and exact span probability written out.
  // `pinned` (optional): the indices of the entities the user pinned, marked "pinned" in words too.
  function entityMarks(text, entities, colorOf, attrs, pinned) {
    const ents = h('div', attrs);
    let pos = 0;
    entities.forEach((e, i) => {
      if (e.start < pos) return;
      const pin = Boolean(pinned && pinned.has(i));
      ents.append(text.slice(pos, e.start));
      ents.append(h('mark', { class: `ent${pin ? ' pinned' : ''}`, style: `background-color:${colorOf(e.label)}`, dataset: { label: e.label, start: e.start, end: e.end, probability: e.probability === null ? '' : e.probability, ...(pin ? { pinned: 'true' } : {}) } }, [
        h('span', { class: 'ent-text', text: text.slice(e.start, e.end) }),
        h('span', { class: 'ent-label', text: e.label }),
        pin ? h('span', { class: 'ent-pin', text: 'pinned' }) : null,
        h('span', { class: 'ent-prob', text: e.probability === null ? '' : `p = ${fmt(e.probability)}` }),
      ]));
      pos = e.end;
    });
    ents.append(text.slice(pos));
    return ents;
  }

  // Pins: what the user already knows about the text, sent as POST /api/tag's "spans" (known
  // entities, [start, end, type]) and "forbid" ([start, end, label or type] excluded there); the
  // server conditions the decoding, the span probabilities, the marginals and the best paths on
  // them. Offsets are the server's: Unicode code points, end exclusive (a textarea counts UTF-16
  // units, so a selection is converted). A selection is widened to whole tokens of the last answer.
  const codePoints = (text, units) => Array.from(text.slice(0, units)).length;
  const cpSlice = (text, a, b) => Array.from(text).slice(a, b).join('');
  function pinControl(types, input, rerun) {
    const spans = [];
    const forbid = [];
    let tokens = null; // the last answer's tokens, and the text they are of
    let tokensOf = null;
    const start = h('input', { type: 'number', id: 'pin-start', min: 0, step: 1, 'aria-label': 'first character of the span' });
    const end = h('input', { type: 'number', id: 'pin-end', min: 1, step: 1, 'aria-label': 'character just past the span' });
    const typeSel = h('select', { id: 'pin-type', 'aria-label': 'entity type of the span' }, types.map((t) => h('option', { value: t, text: t }))
      .concat([h('option', { value: 'O', text: 'O (no entity: forbid only)' })]));
    const chosen = h('span', { class: 'model-info', id: 'pin-selection', text: 'select characters in the text above, or type offsets' });
    const status = h('span', { class: 'model-info', id: 'pin-status', role: 'status' });
    const list = h('ul', { class: 'pin-list', id: 'pin-list' });
    const add = h('button', { type: 'button', class: 'btn', id: 'pin-add', text: 'Pin span', disabled: !types.length, title: types.length ? null : 'the model\u2019s labels have no entity types to pin' });
    const ban = h('button', { type: 'button', class: 'btn', id: 'pin-forbid', text: 'Forbid here' });
    const clear = h('button', { type: 'button', class: 'btn', id: 'pins-clear', text: 'Clear pins', disabled: true });
    function range() {
      const a = Number(start.value);
      const b = Number(end.value);
      const n = Array.from(input.value).length;
      if (start.value === '' || end.value === '' || !Number.isInteger(a) || !Number.isInteger(b)) return { error: 'give the start and end offsets (select characters in the text)' };
      if (!(a >= 0 && a < b && b <= n)) return { error: `need 0 ≤ start < end ≤ ${n} (the text's length)` };
      return { start: a, end: b };
    }
    function describe() {
      const r = range();
      chosen.textContent = r.error ? r.error : `“${cpSlice(input.value, r.start, r.end)}” [${r.start}, ${r.end})`;
    }
    function fromSelection() {
      if (input.selectionStart === input.selectionEnd) return;
      const text = input.value;
      let a = codePoints(text, input.selectionStart);
      let b = codePoints(text, input.selectionEnd);
      if (tokens && tokensOf === text) {
        const hit = tokens.filter((t) => t.end > a && t.start < b);
        if (hit.length) { a = hit[0].start; b = hit[hit.length - 1].end; }
      } else {
        const cps = Array.from(text);
        while (a < b && /\s/.test(cps[a])) a += 1;
        while (b > a && /\s/.test(cps[b - 1])) b -= 1;
      }
      if (a >= b) return;
      start.value = a;
      end.value = b;
      describe();
    }
    for (const ev of ['select', 'mouseup', 'keyup']) input.addEventListener(ev, fromSelection);
    start.addEventListener('input', describe);
    end.addEventListener('input', describe);
    function draw() {
      list.replaceChildren(...spans.map((p) => item(p, 'span', spans)).concat(forbid.map((p) => item(p, 'forbid', forbid))));
      clear.disabled = !spans.length && !forbid.length;
    }
    function item(p, kind, from) {
      const what = kind === 'span' ? `pinned as ${p.label}` : `not ${p.label}`;
      return h('li', { class: `pin pin-${kind}`, dataset: { kind, start: p.start, end: p.end, label: p.label } }, [
        h('span', { text: `“${cpSlice(input.value, p.start, p.end)}” [${p.start}, ${p.end}) ${what}` }),
        h('button', { type: 'button', class: 'btn pin-remove', 'aria-label': `remove: ${what}`, text: '×', on: { click: () => { from.splice(from.indexOf(p), 1); draw(); rerun(); } } }),
      ]);
    }
    function push(kind) {
      const r = range();
      const label = typeSel.value;
      if (r.error) { status.textContent = r.error; return; }
      if (kind === 'span' && label === 'O') { status.textContent = 'O is no entity type: it can be forbidden, not pinned'; return; }
      status.textContent = '';
      (kind === 'span' ? spans : forbid).push({ start: r.start, end: r.end, label });
      draw();
      rerun();
    }
    add.addEventListener('click', () => push('span'));
    ban.addEventListener('click', () => push('forbid'));
    clear.addEventListener('click', () => { spans.length = 0; forbid.length = 0; status.textContent = ''; draw(); rerun(); });
    const node = h('fieldset', { class: 'pins', id: 'model-pins' }, [
      h('legend', { text: 'pin what you know' }),
      h('div', { class: 'controls' }, [
        h('label', {}, ['start ', start]), h('label', {}, ['end ', end]), h('label', {}, ['type ', typeSel]), add, ban, clear, chosen,
      ]),
      list, status,
    ]);
    return {
      node,
      // The request's constraints: none at all when nothing is pinned (the request is then as before pins).
      fields() {
        const out = {};
        if (spans.length) out.spans = spans.map((p) => [p.start, p.end, p.label]);
        if (forbid.length) out.forbid = forbid.map((p) => [p.start, p.end, p.label]);
        return out;
      },
      tokens(text, toks) { tokens = toks; tokensOf = text; },
    };
  }

  // Several lines decoded together by a higher-order model (POST /api/tag with "texts" and "group"):
  // each line's entities, each group's certificate, and the tokens the joint decoding relabelled.
  const JOINT_LINES = [
    'Solenne Power guided to 4 percent growth in the first quarter, said CEO Mara Voss.',
    'Mara Voss said Solenne Power grew.',
    'Voss and Power met in the quarter.',
  ];
  function jointMode(info, colorOf) {
    const input = h('textarea', { id: 'joint-texts', rows: 6, 'aria-label': 'texts to decode jointly, one per line', placeholder: 'One text per line' });
    input.value = JOINT_LINES.join('\n');
    const groupSel = h('select', { id: 'joint-group', 'aria-label': 'which lines are decoded together' }, [
      h('option', { value: 'all', text: 'all lines as one group', selected: true }),
      h('option', { value: 'auto', text: info.grouping ? `the model's saved grouping (${info.grouping})` : 'the model\u2019s saved grouping (this model saved none)', disabled: !info.grouping }),
      h('option', { value: 'none', text: 'each line alone (the chain)' }),
    ]);
    const button = h('button', { type: 'submit', class: 'btn primary', id: 'joint-submit', text: 'Decode jointly' });
    const out = h('div', { id: 'joint-output' });
    const form = h('form', { class: 'model-form', id: 'joint-form', on: { submit: (e) => { e.preventDefault(); run(); } } }, [
      input, h('div', { class: 'controls' }, [button, h('label', {}, ['groups ', groupSel]), h('span', { class: 'model-info', text: 'One text per line; blank lines are left out.' })]),
    ]);
    let seq = 0;
    async function run() {
      const mine = ++seq;
      const lines = input.value.split('\n').map((text, i) => ({ text, line: i + 1 })).filter((l) => l.text.trim());
      button.disabled = true;
      out.dataset.state = 'busy';
      try {
        if (!lines.length) throw new Error('type at least one line');
        const res = await fetch('api/tag', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ texts: lines.map((l) => l.text), group: groupSel.value }) });
        const body = await res.json().catch(() => ({ error: `the server answered ${res.status} without JSON` }));
        if (mine !== seq) return;
        if (!res.ok) throw new Error(body.error || `the server answered ${res.status}`);
        show(body, lines.map((l) => l.line));
        out.dataset.state = 'done';
      } catch (err) {
        if (mine !== seq) return;
        out.replaceChildren(h('div', { class: 'notice error', role: 'alert', id: 'joint-error' }, [h('strong', { text: 'could not decode these lines' }), String(err.message || err)]));
        out.dataset.state = 'error';
      } finally {
        if (mine === seq) button.disabled = false;
      }
    }
    function lineView(r, i, lineNo) {
      const t = r.texts[i];
      const changed = new Set(t.changed);
      return h('div', { class: 'sentence joint-line', dataset: { text: i, line: lineNo, changed: t.changed.length } }, [
        h('div', { class: 'lab', text: `line ${lineNo}${t.changed.length ? `: ${t.changed.length} token${t.changed.length > 1 ? 's' : ''} relabelled by the joint decoding` : ''}` }),
        entityMarks(t.text, t.entities, colorOf, { class: 'ents joint-ents' }),
        t.tokens.length ? h('div', { class: 'tokens' }, t.tokens.map((tok, k) => h('span', { class: `tok${changed.has(k) ? ' changed' : ''}`, dataset: { t: k }, title: changed.has(k) ? `the chain alone: ${t.chain_tags[k]}; decoded jointly: ${t.tags[k]}` : null }, [
          h('span', { class: 'w', text: tok.text }),
          h('span', { class: 'l', text: changed.has(k) ? `${t.chain_tags[k]} → ${t.tags[k]}` : t.tags[k] }),
        ]))) : h('p', { class: 'note', text: 'no tokens: nothing to decode' }),
      ]);
    }
    function certBadge(certified) {
      if (certified === null) return h('span', { class: 'badge cert-none', text: 'not decoded (no tokens)' });
      return h('span', { class: `badge ${certified ? 'cert-yes' : 'cert-no'}`, text: certified ? 'certified optimal ✓' : 'not certified ✗ (stopped at the iteration limit)' });
    }
    function show(r, lineNos) {
      out.replaceChildren();
      const changed = r.texts.reduce((a, t) => a + t.changed.length, 0);
      const certified = r.groups.filter((g) => g.certified).length;
      out.append(h('div', { class: 'stats' }, [
        stat('lines', String(r.texts.length), 'joint-lines'),
        stat('groups decoded jointly', String(r.groups.length), 'joint-groups'),
        stat('groups certified', r.groups.length ? `${certified} / ${r.groups.length}` : '–', 'joint-certified'),
        stat('tokens relabelled', String(changed), 'joint-changed'),
      ]));
      const view = h('div', { id: 'joint-result' });
      if (!r.groups.length) {
        view.append(h('div', { class: 'joint-group', dataset: { group: 'none' } }, [
          h('h3', { text: 'Each line alone' }, []),
          h('p', { class: 'note', text: 'Decoded by the chain, line by line: nothing is decoded jointly, so nothing is certified or relabelled.' }),
        ].concat(r.texts.map((_, i) => lineView(r, i, lineNos[i])))));
      }
      r.groups.forEach((g, gi) => {
        const lines = g.texts.map((i) => lineNos[i]);
        view.append(h('div', { class: 'joint-group', dataset: { group: gi, certified: g.certified === null ? '' : g.certified } }, [
          h('h3', {}, [`Group ${gi + 1} (line${lines.length > 1 ? 's' : ''} ${lines.join(', ')})`, certBadge(g.certified)]),
        ].concat(g.texts.map((i) => lineView(r, i, lineNos[i])))));
      });
      out.append(view, h('p', { class: 'note', text: 'Boxed tokens (dashed border, "chain → joint") are those whose label the joint decoding changed from the chain alone. Entities are the joint decoding\u2019s; their p is still the chain\u2019s marginal for that line alone, not a probability under the joint model. A group is certified when the decoder proved its labelling optimal.' }));
    }
    return { form, out };
  }

  const ENT_COLORS = ['#7aecec', '#bfeeb7', '#feca74', '#ff9561', '#aa9cfc', '#c887fb', '#9cc9cc', '#ffeb80', '#ff8197', '#e4e7d2', '#f0d0ff', '#bfe1d9'];
  function renderModel(panel, info) {
    panel.append(h('h2', { text: 'Your model' }));
    if (!info || !info.loaded) {
      panel.dataset.state = 'no-model';
      panel.append(h('div', { class: 'notice', id: 'no-model', role: 'status' }, [
        h('strong', { text: 'no model loaded' }),
        'Start the lab with your model to tag sentences here: ', h('code', { text: 'crfhead lab --model PATH' }),
        ' (a training checkpoint .ckpt, or a folder written by TextTagger.save()).',
      ]));
      return null;
    }
    const types = Array.from(new Set(info.labels.filter((l) => l.includes('-')).map((l) => l.split('-').slice(1).join('-')))).sort();
    const colorOf = (t) => ENT_COLORS[Math.max(0, types.indexOf(t)) % ENT_COLORS.length];
    panel.append(h('p', { class: 'model-info', id: 'model-info', text: `${info.head} head on ${info.encoder}, decoder ${info.decoder}, ${info.labels.length} labels (${info.scheme || 'no scheme'}), from ${info.path}` }));
    const input = h('textarea', { id: 'model-text', rows: 2, 'aria-label': 'a sentence to tag', placeholder: 'Type a sentence and press Enter' });
    input.value = 'Solenne Power guided to 4 percent growth in the first quarter, said CEO Mara Voss.';
    const kSel = h('select', { id: 'model-k', 'aria-label': 'number of best paths' }, [1, 3, 5, 10, 20].map((k) => h('option', { value: k, selected: k === 5, text: String(k) })));
    const button = h('button', { type: 'submit', class: 'btn primary', id: 'model-submit', text: 'Tag' });
    const out = h('div', { id: 'model-output' });
    const form = h('form', { class: 'model-form', on: { submit: (e) => { e.preventDefault(); run(); } } }, [
      input, h('div', { class: 'controls' }, [button, h('label', {}, ['best paths ', kSel]), h('span', { class: 'model-info', text: 'Enter tags; Shift+Enter starts a new line.' })]),
    ]);
    input.addEventListener('keydown', (e) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); run(); } });
    const pins = pinControl(info.scheme ? types : [], input, () => run());
    form.append(pins.node);
    if (info.group_decoder) {
      // A higher-order model also decodes several texts together: offer both modes.
      const one = h('div', { id: 'model-one' }, [form, out]);
      const joint = jointMode(info, colorOf);
      const several = h('div', { id: 'model-joint', hidden: true }, [joint.form, joint.out]);
      const modes = h('div', { class: 'controls' }, [radioGroup('model-mode', 'mode', [
        { value: 'one', label: 'one sentence: marginals and best paths' },
        { value: 'joint', label: 'decode these lines jointly' },
      ], 'one', (v) => { one.hidden = v !== 'one'; several.hidden = v !== 'joint'; })]);
      panel.append(modes, one, several);
    } else {
      panel.append(form, out);
    }
    let seq = 0;
    async function run() {
      const mine = ++seq;
      button.disabled = true;
      out.dataset.state = 'busy';
      try {
        const text = input.value;
        const res = await fetch('api/tag', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(Object.assign({ text, k: Number(kSel.value) }, pins.fields())) });
        const body = await res.json().catch(() => ({ error: `the server answered ${res.status} without JSON` }));
        if (mine !== seq) return;
        if (!res.ok) throw new Error(body.error || `the server answered ${res.status}`);
        pins.tokens(text, body.tokens);
        show(body);
        out.dataset.state = 'done';
      } catch (err) {
        if (mine !== seq) return;
        out.replaceChildren(h('div', { class: 'notice error', role: 'alert', id: 'model-error' }, [h('strong', { text: 'could not tag this text' }), String(err.message || err)]));
        out.dataset.state = 'error';
      } finally {
        if (mine === seq) button.disabled = false;
      }
    }
    function show(r) {
      out.replaceChildren();
      // Entities in the text, displaCy style, with the type and the exact span probability written out.
      const conditioned = Array.isArray(r.spans);
      const ents = entityMarks(r.text, r.entities, colorOf, { class: 'ents', id: 'entities', dataset: { conditioned: conditioned ? 'true' : 'false' } }, conditioned ? new Set(r.pinned) : null);
      out.append(h('h3', { text: `Entities (${r.entities.length})${conditioned ? ', given what you pinned' : ''}` }), ents);
      out.append(h('p', { class: 'note', text: r.calibrated
        ? `p is the exact probability that the span is an entity of that type under the model (a sum over every path${conditioned ? ' that keeps your pins and forbids: a pinned span has p = 1' : ''}), not a score of one token.`
        : 'This head is not a probability model: no span probabilities; the trellis shows the Gibbs distribution of its scores.' }));
      if (conditioned) out.append(pinEffect(r));
      if (!r.tokens.length) return;
      // The sentence's trellis: rows are labels, columns tokens; the decoded path drawn over it.
      const idx = r.tags.map((t) => r.labels.indexOf(t));
      const tr = trellis({
        rows: r.labels, cols: r.tokens.map((t) => t.text), rotateCols: true, top: 70, labelWidth: 86, cellHeight: 24, maxWidth: 1180,
        paths: [Object.assign({ path: idx }, PATH_STYLES.viterbi, { label: 'decoded tags', dy: 0 })], aria: 'marginals of the sentence',
      });
      tr.setValues(r.marginals, (t, k, v) => `${r.tokens[t].text} = ${r.labels[k]}: marginal ${v}`);
      tr.svg.id = 'model-trellis';
      out.append(h('h3', { text: 'Marginals p(zₜ = k | x)' }), h('div', { class: 'legend' }, [
        legendKey('decoded tags (the model\u2019s decoder)', { color: PATH_STYLES.viterbi.color, shape: 'circle', filled: true }),
        legendKey('darker cell = larger marginal', { swatch: heat(0.8), line: false }),
      ]), h('div', { class: 'figure' }, tr.svg));
      // The k best paths, tags that differ from the best path marked (dashed box).
      const best = r.topk.length ? r.topk[0].tags : [];
      out.append(h('h3', { text: `The ${r.topk.length} best paths` }), table(['rank', 'probability', 'tags (entity tags underlined; differences from the best path boxed)'], r.topk.map((p, i) => [
        String(i + 1), fmt(p.probability, 4),
        h('span', {}, p.tags.map((tg, t) => h('span', { class: `${tg !== 'O' ? 'ent-tag' : ''}${i && tg !== best[t] ? ' diff' : ''}`, text: `${r.tokens[t].text}/${tg}${t < p.tags.length - 1 ? ' ' : ''}` }))),
      ]), { class: 'topk', textCols: [2], id: 'topk-table' }));
      const total = r.topk.reduce((a, p) => a + p.probability, 0);
      out.append(h('p', { class: 'note', text: `These ${r.topk.length} paths carry ${fmt(100 * total, 1)}% of the probability (of ${r.labels.length}^${r.tokens.length} paths${conditioned ? '; probabilities given your pins and forbids' : ''}).` }));
    }
    // What the pins changed: the tokens relabelled against the free decoding, and each entity's
    // probability without and with the constraints.
    function pinEffect(r) {
      const n = r.spans.length + r.forbid.length;
      const box = h('div', { class: 'pin-effect', id: 'pin-effect' });
      box.append(h('p', { class: 'note', text: `Conditioned on ${n} constraint${n === 1 ? '' : 's'}: ${r.changed.length ? `${r.changed.length} token${r.changed.length === 1 ? '' : 's'} relabelled against the decoding without them` : 'no token relabelled against the decoding without them'}.` }));
      if (r.changed.length) {
        box.append(h('div', { class: 'tokens', id: 'pin-changed' }, r.changed.map((t) => h('span', { class: 'tok changed', dataset: { t }, title: `without the pins: ${r.free.tags[t]}; with them: ${r.tags[t]}` }, [
          h('span', { class: 'w', text: r.tokens[t].text }),
          h('span', { class: 'l', text: `${r.free.tags[t]} → ${r.tags[t]}` }),
        ]))));
      }
      if (r.calibrated) {
        const key = (e) => `${e.label}:${e.start}:${e.end}`;
        const free = new Map(r.free.entities.map((e) => [key(e), e]));
        const here = new Set(r.entities.map(key));
        const rows = r.entities.map((e) => [e.text, e.label, free.has(key(e)) ? fmt(free.get(key(e)).probability) : 'not decoded', fmt(e.probability)])
          .concat(r.free.entities.filter((e) => !here.has(key(e))).map((e) => [e.text, e.label, fmt(e.probability), 'not decoded']));
        box.append(table(['span', 'type', 'p without the pins', 'p given the pins'], rows, { caption: 'Span probabilities', textCols: [0, 1], id: 'pin-probabilities' }));
      }
      return box;
    }
    return form;
  }

  // ------------------------------------------------------------------------- the tabs
  const RENDER = {
    trellis: ['Trellis', renderTrellis],
    learning_curves: ['Learning curves', renderLearningCurves],
    label_bias: ['CRF vs MEMM', renderLabelBias],
    perceptron: ['Perceptron', renderPerceptron],
    finance: ['Finance', renderFinance],
    higher_order: ['Higher order', renderHigherOrder],
  };

  async function getJSON(url) {
    const res = await fetch(url, { cache: 'no-cache' });
    if (!res.ok) throw new Error(`${url}: the server answered ${res.status}`);
    return res.json();
  }

  // Which payloads exist: the lab server lists them (so no request for a missing file is made);
  // a plain static server does not, and then every payload is asked for.
  async function available() {
    try {
      const res = await fetch('api/payloads', { cache: 'no-cache' });
      if (res.ok) return new Set((await res.json()).payloads);
    } catch (err) { /* not the lab server */ }
    return null;
  }

  async function renderTab(tab, have) {
    const panel = document.getElementById(`panel-${tab}`);
    panel.replaceChildren();
    if (tab === 'model') {
      let info = null;
      try { info = await getJSON('api/model'); } catch (err) { info = null; }
      try { renderModel(panel, info); if (info && info.loaded) panel.dataset.state = 'ready'; } catch (err) { console.warn(err); failed(panel, 'Your model', err); }
      return;
    }
    const [title, render] = RENDER[tab];
    if (have && !have.has(tab)) { missing(panel, tab, title); return; }
    let data;
    try { data = await getJSON(`data/${tab}.json`); } catch (err) { missing(panel, tab, title); return; }
    try {
      const fig = render(panel, data);
      if (fig) fig.classList.add('lab-figure');
      panel.dataset.state = 'ready';
    } catch (err) {
      console.warn(`${tab}: payload does not match the page`, err);
      panel.replaceChildren();
      failed(panel, title, `data/${tab}.json does not have the shape this page expects: ${err.message}`);
    }
  }

  function selectTab(tab, focus) {
    const buttons = document.querySelectorAll('.tabs [role="tab"]');
    if (![...buttons].some((b) => b.dataset.tab === tab)) tab = 'trellis';
    for (const b of buttons) {
      const on = b.dataset.tab === tab;
      b.setAttribute('aria-selected', String(on));
      b.tabIndex = on ? 0 : -1;
      if (on && focus) b.focus();
      document.getElementById(`panel-${b.dataset.tab}`).hidden = !on;
    }
    if (location.hash !== `#${tab}`) history.replaceState(null, '', `#${tab}`);
    document.body.dataset.tab = tab;
  }

  async function start() {
    const buttons = [...document.querySelectorAll('.tabs [role="tab"]')];
    buttons.forEach((b, i) => {
      b.addEventListener('click', () => selectTab(b.dataset.tab));
      b.addEventListener('keydown', (e) => {
        const step = e.key === 'ArrowRight' ? 1 : e.key === 'ArrowLeft' ? -1 : 0;
        if (step) { e.preventDefault(); selectTab(buttons[(i + step + buttons.length) % buttons.length].dataset.tab, true); }
      });
    });
    window.addEventListener('hashchange', () => selectTab(location.hash.slice(1)));
    selectTab(location.hash.slice(1) || 'trellis');
    const have = await available();
    await Promise.all(buttons.map((b) => renderTab(b.dataset.tab, have)));
    document.body.dataset.ready = 'true';
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
