// Live refresh: a page's `refresh` runs every few seconds (more when it is slow), the next run
// timed from the end of the last (never two at once), paused while the tab is hidden or the user
// pressed Pause.

export const INTERVAL_MS = 3000;
// A refresh that took long (counting a queue of millions) waits this many times as long before
// the next: the page never keeps the database busier than 1 part in SLOWDOWN + 1.
const SLOWDOWN = 5;

export class Live {
  constructor() {
    this.refresh = null;
    this.timer = null;
    this.userPaused = false;
    this.running = false;
    this.status = null;
    this.button = null;
    document.addEventListener("visibilitychange", () => this.schedule(0));
  }

  get paused() {
    return this.userPaused || document.hidden;
  }

  // Starts refreshing with `refresh` (an async function), replacing the page's before it. The
  // first run happens even when paused: a page opened while paused still shows its data once.
  start(refresh) {
    this.stop();
    this.refresh = refresh;
    this.schedule(0, true);
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
    this.refresh = null;
  }

  // Runs a refresh now (after an action), then goes on at the interval.
  now() {
    this.schedule(0, true);
  }

  schedule(delay, evenIfPaused = false) {
    clearTimeout(this.timer);
    this.timer = null;
    this.show();
    if (!this.refresh || (this.paused && !evenIfPaused)) return;
    this.timer = setTimeout(() => this.run(), delay);
  }

  async run() {
    if (this.running) {
      // One refresh at a time: the one running schedules the next when it ends.
      this.pending = true;
      return;
    }
    const refresh = this.refresh;
    if (!refresh) return;
    this.running = true;
    this.pending = false;
    const started = performance.now();
    try {
      await refresh();
      this.updated = new Date();
    } catch (error) {
      console.error(error); // a page shows its own errors; the refresh goes on
    } finally {
      this.running = false;
    }
    // Asked for meanwhile (an action, another page): at once; else after the interval.
    const again = this.pending || refresh !== this.refresh;
    const interval = Math.max(INTERVAL_MS, SLOWDOWN * (performance.now() - started));
    this.schedule(again ? 0 : interval, again);
  }

  show() {
    if (this.button) {
      this.button.textContent = this.userPaused ? "Resume" : "Pause";
      this.button.setAttribute("aria-pressed", String(this.userPaused));
    }
    if (this.status) {
      const when = this.updated ? " · updated " + this.updated.toLocaleTimeString("en-GB", { hour12: false }) : "";
      const state = this.userPaused ? "Paused" : document.hidden ? "Paused (tab hidden)" : "Live";
      this.status.textContent = state + when;
      this.status.dataset.state = this.paused ? "paused" : "live";
    }
  }

  // The Pause/Resume control and its status line, for a page's toolbar.
  controls(h) {
    this.button = h("button", { type: "button", id: "pause", "aria-pressed": "false" }, "Pause");
    this.button.addEventListener("click", () => {
      this.userPaused = !this.userPaused;
      this.schedule(0);
    });
    this.status = h("span", { id: "live-status", class: "live", role: "status" });
    this.show();
    return [this.button, this.status];
  }
}
