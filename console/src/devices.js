// What the copies page says about GPUs: pure, so tests/console/test_helpers.py runs them table-driven.

// Where a copy computes: its GPUs, or the CPU, saying so when it asked for GPUs this host lacks (--cpu-fallback).
export function device(c) {
  if (c.gpus?.length) return `GPU ${c.gpus.join(', ')}`;
  if (c.cpu_fallback) return `CPU (asked for ${c.accelerators} GPU, --cpu-fallback)`;
  return c.device === 'cpu' ? 'CPU' : (c.device || '–');
}

export function hostGpus(g) {
  if (g.count === null) return g.message;
  const fallback = g.cpu_fallback ? ' Copies asking for GPUs it lacks run on CPU (--cpu-fallback).' : '';
  if (!g.count) return `This host has no GPUs for copies.${fallback}`;
  const held = g.gpus.filter((x) => x.copy_id).length;
  return `This host's GPUs: ${g.gpus.map((x) => `${x.id}: ${x.name}`).join(', ')} (${g.source}); ${held} held by copies.${fallback}`;
}
