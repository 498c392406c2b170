// The playground's request, built from the form: which route, which body. Pure, so the raw request and the
// snippets show exactly what is sent.

export const MODES = [
  { id: 'chat', label: 'Chat (OpenAI)' },
  { id: 'completion', label: 'Completion (OpenAI)' },
  { id: 'tgi', label: 'TGI payload (SageMaker runtime)' },
];

// form: {mode, model, target: {endpoint, component}, system, messages, prompt, maxTokens, temperature, topP, seed,
// stream}
export function buildRequest(form) {
  const sampling = samplingOf(form);
  if (form.mode === 'chat') {
    const messages = [...(form.system ? [{ role: 'system', content: form.system }] : []), ...form.messages];
    return { path: '/v1/chat/completions', headers: {}, body: { model: form.model, messages, ...sampling, stream: form.stream } };
  }
  if (form.mode === 'completion') {
    return { path: '/v1/completions', headers: {}, body: { model: form.model, prompt: form.prompt, ...sampling, stream: form.stream } };
  }
  const { endpoint, component } = form.target;
  const suffix = form.stream ? 'invocations-response-stream' : 'invocations';
  const parameters = { max_new_tokens: sampling.max_tokens };
  if (sampling.temperature > 0) Object.assign(parameters, { temperature: sampling.temperature, do_sample: true });
  if (sampling.top_p !== undefined && sampling.top_p < 1) parameters.top_p = sampling.top_p;
  if (sampling.seed !== undefined) parameters.seed = sampling.seed;
  return {
    path: `/endpoints/${encodeURIComponent(endpoint)}/${suffix}`,
    headers: component ? { 'X-Amzn-SageMaker-Inference-Component': component } : {},
    body: { inputs: form.prompt, parameters, ...(form.stream ? { stream: true } : {}) },
  };
}

function samplingOf(form) {
  const sampling = { max_tokens: Number(form.maxTokens) };
  if (form.temperature !== '') sampling.temperature = Number(form.temperature);
  if (form.topP !== '') sampling.top_p = Number(form.topP);
  if (form.seed !== '' && form.seed !== undefined) sampling.seed = Number(form.seed);
  return sampling;
}

// The text an answer adds: an OpenAI chat or completion chunk, or a TGI token event or whole answer.
export function textOf(mode, chunk) {
  if (mode === 'chat') return chunk.choices?.[0]?.delta?.content ?? chunk.choices?.[0]?.message?.content ?? '';
  if (mode === 'completion') return chunk.choices?.[0]?.text ?? '';
  if (Array.isArray(chunk)) return chunk.map((c) => c.generated_text ?? '').join('');
  if (chunk.token) return chunk.token.special ? '' : chunk.token.text ?? '';
  return chunk.generated_text ?? '';
}
