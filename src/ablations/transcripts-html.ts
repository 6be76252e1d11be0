/**
 * A run's transcripts as one static, self-contained HTML page (`transcripts.html` beside `items.jsonl`): per
 * judgment its item, label, kind, verdict and status, and per LLM call the messages sent, the raw reply and
 * the reasoning. Every text from the dataset or a judge is HTML-escaped; no external resource is loaded; the
 * only script is a filter over the items (the page reads fine without it).
 */
import type { ItemRecord } from './records.js';

const ESCAPES: ReadonlyMap<string, string> = new Map([
  ['&', '&amp;'],
  ['<', '&lt;'],
  ['>', '&gt;'],
  ['"', '&quot;'],
  ["'", '&#39;'],
]);

/** Text safe inside an HTML element or a quoted attribute. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES.get(c) ?? c);
}

const STYLE = `body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;max-width:70em}
details{border:1px solid #ccc;border-radius:4px;margin:.4em 0;padding:.3em .6em}
summary{cursor:pointer}.wrong summary{background:#fde8e8}.failed summary{background:#fff4d6}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.5em;margin:.2em 0}
.call{border-left:3px solid #88a;padding-left:.6em;margin:.6em 0}.meta{color:#555}`;

const SCRIPT = `const q=document.getElementById('q'),w=document.getElementById('wrong');
function f(){const t=q.value.toLowerCase();for(const d of document.querySelectorAll('details.item')){
const hit=d.dataset.search.includes(t)&&(!w.checked||d.classList.contains('wrong'));d.hidden=!hit}}
q.addEventListener('input',f);w.addEventListener('change',f);`;

function callHtml(call: NonNullable<ItemRecord['calls']>[number]): string {
  const messages = call.messages
    .map((m) => `<div><b>${escapeHtml(m.role)}</b><pre>${escapeHtml(m.content)}</pre></div>`)
    .join('');
  const reasoning =
    call.reasoning === undefined ? '' : `<div><b>reasoning</b><pre>${escapeHtml(call.reasoning)}</pre></div>`;
  const reply =
    call.reply === null
      ? `<div><b>no reply</b>: ${escapeHtml(call.error ?? 'failed')}</div>`
      : `<div><b>raw reply</b>${call.cached === true ? ' (from the response cache)' : ''}<pre>${escapeHtml(call.reply)}</pre></div>`;
  const round = call.round === null ? '' : ` · round ${call.round}`;
  return `<div class="call"><div class="meta">${escapeHtml(call.nodeId)} (${escapeHtml(call.role)})${round} · model ${escapeHtml(call.model)}</div>${messages}${reasoning}${reply}</div>`;
}

function itemHtml(r: ItemRecord): string {
  const failed = r.reward === null;
  const wrong = !failed && r.label !== undefined && r.reward !== r.label;
  const cls = ['item', ...(wrong ? ['wrong'] : []), ...(failed ? ['failed'] : [])].join(' ');
  const label = r.label === undefined ? '?' : r.label === 1 ? 'match' : 'no_match';
  const epoch = r.epoch === undefined || r.epoch === 0 ? '' : ` · epoch ${r.epoch + 1}`;
  const head =
    `${escapeHtml(r.graph)} · item ${escapeHtml(r.item)}${epoch} · label ${label} (${escapeHtml(r.kind ?? '?')}) · ` +
    `verdict ${escapeHtml(r.verdict ?? r.status)}${wrong ? ' · WRONG' : ''}`;
  const stances = r.messages
    .map((m) => {
      const reasoning = m.reasoning === undefined ? '' : `<pre>${escapeHtml(m.reasoning)}</pre>`;
      return `<li>${escapeHtml(m.nodeId)} round ${m.round}: ${escapeHtml(m.stance ?? (m.failed === true ? 'failed' : '–'))}${
        m.confidence === null ? '' : ` (${m.confidence})`
      }${reasoning}</li>`;
    })
    .join('');
  const calls = (r.calls ?? []).map(callHtml).join('');
  const why = r.reason === undefined ? '' : `<div class="meta">reason: ${escapeHtml(r.reason)}</div>`;
  const search = escapeHtml(`${r.graph} ${r.item} ${r.verdict ?? r.status} ${r.kind ?? ''}`.toLowerCase());
  return `<details class="${cls}" data-search="${search}"><summary>${head}</summary>${why}<ul>${stances}</ul>${calls || '<div class="meta">no LLM call</div>'}</details>`;
}

/** The page for `records` (in file order). */
export function renderTranscriptsHtml(records: readonly ItemRecord[], options: { title: string }): string {
  const wrong = records.filter(
    (r) => r.reward !== null && r.label !== undefined && r.reward !== r.label,
  ).length;
  const title = escapeHtml(options.title);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<style>${STYLE}</style></head><body>
<h1>${title}</h1>
<p class="meta">${records.length} judgments, ${wrong} against the label. Filter: <input id="q" placeholder="graph, item, verdict, kind"> <label><input type="checkbox" id="wrong"> wrong only</label></p>
${records.map(itemHtml).join('\n')}
<script>${SCRIPT}</script>
</body></html>
`;
}
