// Every rank's critical path side by side (from /critical_path/ranks): its length against its wall time, a bar of
// causes per rank, its longest segment, and which rank's path is longest and why. Clicking a rank picks it.
import { h } from "../../dom";
import { time } from "../../format";
import { CAUSE_LABELS, type RankPaths } from "./api";
import { causeBar } from "./list";

export function rankPaths(data: RankPaths, order: string[], current: string, onPick: (worker: string) => void, open = false): HTMLDetailsElement {
  const longest = Math.max(1, ...data.ranks.map((r) => r.path_us));
  const rows = data.ranks.map((r) =>
    h(
      "tr",
      {
        class: `${r.worker === data.longest ? "cp-longest" : ""} ${r.worker === current ? "cp-current" : ""}`.trim(),
        title: `Show ${r.worker}'s graph and critical path`,
        on: { click: () => onPick(r.worker) },
      },
      h("td", { class: "mono", text: r.rank === null ? r.worker : `${r.rank}` }),
      h("td", { class: "num", text: time(r.path_us) }),
      // The bar's length is the rank's path against the longest rank's, so ranks compare at a glance.
      h("td", { class: "cp-rank-bar" }, h("div", { style: { width: `${(100 * r.path_us) / longest}%` } }, causeBar(r.causes, order, r.wall_us))),
      h("td", {
        class: "cp-rank-top",
        text: r.top ? `${r.top.name}` : "",
        title: r.top ? `${r.top.name}: ${CAUSE_LABELS[r.top.cause] ?? r.top.cause}, ${time(r.top.dur_us)}` : "",
      }),
    ),
  );
  const box = h(
    "details",
    { class: "cp-ranks" },
    h("summary", { class: "section-title", text: `Every rank's critical path (${data.ranks.length})${data.longest ? ` · longest: ${data.longest}` : ""}` }),
    data.why ? h("div", { class: "small cp-why", text: data.why }) : null,
    h(
      "table",
      { class: "cp-ranks-table" },
      h("thead", null, h("tr", null, ...["Rank", "Path", "Causes", "Longest segment"].map((t) => h("th", { text: t })))),
      h("tbody", null, ...rows),
    ),
  );
  box.open = open;
  return box;
}
