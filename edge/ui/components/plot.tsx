import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";

export interface PlotSeries {
  label: string;
  /** A CSS colour; the palette in styles.css (--plot-1 ...) reads well in light and dark. */
  stroke?: string;
  /** Which y axis: "y" (left, default) or "y2" (right). */
  scale?: "y" | "y2";
}

export interface PlotProps {
  /** What the plot shows, for its caption and for screen readers. */
  title: string;
  /** x values first, then one array per series (uPlot's aligned data); null leaves a gap. */
  data: [number[], ...(number | null)[][]];
  series: PlotSeries[];
  /** "time": x are unix seconds; "number": x are plain numbers (steps). */
  x: { label: string; kind: "time" | "number" };
  y: { label: string; y2?: string };
  height?: number;
  /** Stepped lines (GPU allocation, queue depth) instead of straight segments. */
  stepped?: boolean;
}

const PALETTE = ["--plot-1", "--plot-2", "--plot-3", "--plot-4"];

function cssColour(name: string, element: Element): string {
  return getComputedStyle(element).getPropertyValue(name).trim() || "#4477aa";
}

/** Axis labels that stay readable for learning rates: 1e-4, not 0. */
const tickLabels = (_: uPlot, ticks: number[]) =>
  ticks.map((v) => (v === 0 ? "0" : Math.abs(v) < 0.01 || Math.abs(v) >= 1e5 ? v.toExponential(1) : String(Number(v.toPrecision(4)))));

/**
 * A uPlot chart that follows its data (setData on every change, no rebuild) and its container's
 * width. Its numbers are also readable without the picture: the caption says what it shows and
 * the latest values (an accessible summary; uPlot's canvas is not readable by screen readers).
 */
export function Plot({ title, data, series, x, y, height = 240, stepped = false }: PlotProps) {
  const box = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | null>(null);

  useEffect(() => {
    const element = box.current!;
    const text = cssColour("--text", element);
    const grid = cssColour("--border", element);
    const paths = stepped ? uPlot.paths.stepped!({ align: 1 }) : undefined;
    const options: uPlot.Options = {
      width: Math.max(200, element.clientWidth),
      height,
      scales: { x: { time: x.kind === "time" } },
      axes: [
        { label: x.label, stroke: text, grid: { stroke: grid }, ticks: { stroke: grid } },
        { label: y.label, stroke: text, grid: { stroke: grid }, ticks: { stroke: grid }, values: tickLabels },
        ...(y.y2 ? [{ label: y.y2, scale: "y2", side: 1 as const, stroke: text, grid: { show: false }, values: tickLabels }] : []),
      ],
      series: [
        { label: x.label },
        ...series.map((s, i) => ({
          label: s.label,
          scale: s.scale ?? "y",
          stroke: s.stroke ?? cssColour(PALETTE[i % PALETTE.length]!, element),
          width: 2,
          spanGaps: true,
          ...(paths ? { paths } : {}),
        })),
      ],
      legend: { show: true },
      cursor: { drag: { x: true, y: false } },
    };
    chart.current = new uPlot(options, data as uPlot.AlignedData, element);
    const resize = new ResizeObserver(() => chart.current?.setSize({ width: Math.max(200, element.clientWidth), height }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      chart.current?.destroy();
      chart.current = null;
    };
    // Rebuilt only when its shape changes; new points go through setData below.
  }, [series.map((s) => s.label).join("|"), x.kind, x.label, y.label, y.y2, height, stepped]);

  useEffect(() => {
    chart.current?.setData(data as uPlot.AlignedData);
  }, [data]);

  const last = data[0].length - 1;
  const summary =
    last < 0
      ? "no data yet"
      : series
          .map((s, i) => {
            // The series' latest value: on a shared x axis (runs compared by time) its last x may be another's.
            const column = data[i + 1] ?? [];
            let at = last;
            while (at > 0 && (column[at] === null || column[at] === undefined)) at--;
            const value = column[at];
            return `${s.label} ${value === null || value === undefined ? "-" : Number(value.toPrecision(4))}`;
          })
          .join(", ");
  return (
    <figure class="plot">
      <figcaption>
        {title} <span class="plot-summary">({summary})</span>
      </figcaption>
      <div ref={box} class="plot-canvas" role="img" aria-label={`${title}: ${summary}`} />
    </figure>
  );
}
