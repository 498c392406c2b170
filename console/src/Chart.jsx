import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2'];

// A uPlot line chart that fills its container's width. data: [xs, ...ys]; series: [{label}, ...] for the ys.
// `summary` is read out to screen readers in place of the drawing.
export function Chart({ title, data, series, unit = '', time = true, summary }) {
  const box = useRef(null);
  const plot = useRef(null);

  useEffect(() => {
    const options = {
      width: box.current.clientWidth || 320,
      height: 180,
      scales: { x: { time } },
      axes: [{}, { size: 56, values: (_, ticks) => ticks.map((t) => `${round(t)}${unit}`) }],
      series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true }))],
      legend: { live: false },
    };
    plot.current = new uPlot(options, data, box.current);
    const observer = new ResizeObserver(() => plot.current?.setSize({ width: box.current.clientWidth, height: 180 }));
    observer.observe(box.current);
    return () => {
      observer.disconnect();
      plot.current.destroy();
      plot.current = null;
    };
  }, [series.map((s) => s.label).join('|'), time, unit]);

  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);

  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title}: ${summary || 'no data yet'}`} />
    </figure>
  );
}

export function round(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return '–';
  if (Number.isInteger(value)) return String(value);
  if (Math.abs(value) >= 100) return Math.round(value).toString();
  if (Math.abs(value) >= 10) return value.toFixed(1);
  return value.toFixed(2);
}
