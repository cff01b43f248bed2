// The tab registry, in display order. Later tabs replace their placeholder with a module of their own.
import { kernelEfficiencyTab } from "./kernelEfficiency";
import { placeholderTab } from "./placeholder";
import type { TabDef } from "./types";

export const TABS: readonly TabDef[] = [
  kernelEfficiencyTab,
  placeholderTab("diff", "Diff", "Comparing two runs or spans kernel by kernel will appear here in a later version."),
  placeholderTab("shapes", "Tensor shapes", "Per-op tensor shapes and their FLOP estimates will appear here in a later version."),
  placeholderTab("graph", "Execution graph", "The linked execution graph and its critical path will appear here in a later version."),
];

export type { TabDef, TabView } from "./types";
