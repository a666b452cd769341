// How the table feels (issue 33): a short sound on your turn and at a deal's end, with a mute
// toggle that is remembered, a vibration on your turn where the device has one, and the
// reduced-motion preference the card animations (app.css) respect.
import { h } from "./ui";

const MUTE_KEY = "kishpa.muted";
let audio: AudioContext | null = null;

export const muted = (): boolean => localStorage.getItem(MUTE_KEY) === "1";

function tone(freqs: number[], ms: number): void {
  if (muted()) return;
  try {
    audio ??= new AudioContext();
    const ctx = audio;
    freqs.forEach((freq, i) => {
      const osc = ctx.createOscillator();
      const gain = ctx.createGain();
      const at = ctx.currentTime + (i * ms) / 1000;
      osc.frequency.value = freq;
      gain.gain.setValueAtTime(0.08, at);
      gain.gain.exponentialRampToValueAtTime(0.0001, at + ms / 1000);
      osc.connect(gain).connect(ctx.destination);
      osc.start(at);
      osc.stop(at + ms / 1000);
    });
  } catch {
    // No audio here (a test browser, a policy): the table plays on silently.
  }
}

/** Your turn began: two rising notes and a short buzz. */
export function yourTurn(): void {
  tone([660, 880], 110);
  if (!muted() && "vibrate" in navigator) navigator.vibrate(60);
}

/** A deal (round) ended: three falling notes. */
export function dealEnded(): void {
  tone([784, 659, 523], 120);
}

/** The sound toggle (its state is kept in localStorage). */
export function muteButton(redraw: () => void): HTMLElement {
  const off = muted();
  return h(
    "button",
    {
      class: "link",
      "aria-pressed": off ? "true" : "false",
      "data-testid": "mute",
      "data-key": "mute",
      onclick: () => {
        localStorage.setItem(MUTE_KEY, off ? "0" : "1");
        redraw();
      },
    },
    off ? "Sound off" : "Sound on",
  );
}
