// The device picker, shown above every tab. A trace that names no device (a 2021
// trace, a down-sampled one) or one matched from its memory size alone gets a picker of datasheet rows,
// pre-selected from what its kernel names give away (`volta_*`, `sm90_*`, Tensile `ISA90a`); the pick is kept
// per run in localStorage and sent as `device_name` with the selection, so every route rates with it.
import { api, ApiError, isAbort, type DevicesResponse, type Selection } from "../api";
import { h, replace } from "../dom";

/** What the /devices route adds for the picker. */
interface PickerFacts extends DevicesResponse {
  datasheet?: string[];
  needs_pick?: boolean;
  hint?: { name: string; why: string; example: string } | null;
}

const STORAGE = "gpuinsight.deviceOverride.";

/** The device the user picked for a run, or null. */
export function deviceOverride(run: string | null | undefined): string | null {
  if (!run) return null;
  try {
    return window.localStorage.getItem(STORAGE + run);
  } catch {
    return null; // storage disabled: no override
  }
}

function setDeviceOverride(run: string, name: string | null): void {
  try {
    if (name) window.localStorage.setItem(STORAGE + run, name);
    else window.localStorage.removeItem(STORAGE + run);
  } catch {
    /* storage disabled: the pick lasts until the page reloads */
  }
}

export class DeviceBanner {
  readonly el = h("div", { class: "device-banner-host" });
  private key = "";
  private controller = new AbortController();

  /** `onChange`: the override of the shown run changed; views must fetch again. */
  constructor(private onChange: () => void) {}

  show(sel: Selection): void {
    const key = `${sel.run}|${sel.worker}|${sel.span}|${deviceOverride(sel.run) ?? ""}`;
    if (key === this.key) return;
    this.key = key;
    this.controller.abort();
    this.controller = new AbortController();
    const signal = this.controller.signal;
    api.devices(sel, signal).then(
      (res) => {
        if (!signal.aborted) this.render(sel, res as PickerFacts);
      },
      (err) => {
        if (isAbort(err) || signal.aborted) return;
        if (err instanceof ApiError && err.status === 400 && /device_name/.test(err.message) && deviceOverride(sel.run)) {
          this.pick(sel.run, null); // a kept pick that is no datasheet row any more (datasheet changed): drop it
          return;
        }
        this.key = ""; // not ready yet or failed: try again with the next selection or poll
        replace(this.el);
      },
    );
  }

  clear(): void {
    this.key = "";
    this.controller.abort();
    replace(this.el);
  }

  private render(sel: Selection, res: PickerFacts): void {
    const picked = deviceOverride(sel.run);
    const parts: HTMLElement[] = [];
    if ((res.needs_pick || picked) && res.datasheet?.length) parts.push(this.picker(sel, res, picked));
    replace(this.el, ...parts);
  }

  private picker(sel: Selection, res: PickerFacts, picked: string | null): HTMLElement {
    const select = h("select", { class: "device-select", attrs: { "aria-label": "Device to rate this run against" } });
    select.append(h("option", { text: "Pick the GPU this ran on…", attrs: { value: "" } }));
    for (const name of res.datasheet ?? []) {
      const suggested = res.hint?.name === name ? " (suggested by kernel names)" : "";
      select.append(h("option", { text: name + suggested, attrs: { value: name } }));
    }
    const matched = res.devices.find((d) => d.spec)?.spec?.name;
    select.value = picked ?? matched ?? res.hint?.name ?? "";
    const apply = h("button", { class: "btn btn-small", text: picked ? "Rate as this device" : "Use this device", attrs: { type: "button" } });
    apply.addEventListener("click", () => this.pick(sel.run, select.value || null));
    const forget = picked ? h("button", { class: "btn btn-small", text: "Forget", attrs: { type: "button", title: "Go back to the device the trace names (or unknown)" } }) : null;
    forget?.addEventListener("click", () => this.pick(sel.run, null));
    const why = picked
      ? `Rated as ${picked}, picked for run “${sel.run}” (kept in this browser).`
      : res.hint
        ? `This trace does not name its GPU${matched ? ` clearly (taken as ${matched} from its properties)` : ""}; its kernel names point to ${res.hint.name}: ${res.hint.why} (e.g. ${res.hint.example}).`
        : "This trace does not name its GPU, so % of peak and efficiency are unknown: pick the GPU it ran on.";
    return h(
      "div",
      { class: "banner banner-info device-picker", attrs: { role: "region", "aria-label": "Device" } },
      h("span", { class: "device-why", text: why }),
      h("span", { class: "device-controls" }, select, apply, forget),
    );
  }

  private pick(run: string, name: string | null): void {
    setDeviceOverride(run, name);
    this.key = "";
    this.onChange();
  }
}
