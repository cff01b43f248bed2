// The Diff tab's default B: the server's most comparable selection for A (`/diff/suggest`: the same worker's
// previous span, else a run on the same device with mostly the same ops), or none with the reason.
import { getJson, type Selection } from "../../api";

export interface SuggestedB {
  b: Selection | null;
  why: string;
}

export function suggestB(a: Selection, signal?: AbortSignal): Promise<SuggestedB> {
  return getJson<SuggestedB>("diff/suggest", { run: a.run, worker: a.worker, span: a.span }, signal);
}
