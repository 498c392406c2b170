// The same request as curl, the openai SDK and boto3 would send it. Pure. Keys come from the environment in the
// snippets: the console never writes a key into text a user may paste elsewhere.

const json = (value, indent = 0) => JSON.stringify(value, null, indent || undefined);

export function curl(origin, request) {
  const headers = Object.entries({ 'Content-Type': 'application/json', ...request.headers })
    .map(([name, value]) => ` \\\n  -H '${name}: ${value}'`)
    .join('');
  const body = json(request.body).replaceAll("'", "'\\''");
  return `curl -sN ${origin}${request.path}${headers} \\\n  -H "Authorization: Bearer $PIER_API_KEY" \\\n  -d '${body}'`;
}

const py = (value) => json(value, 4).replaceAll('true', 'True').replaceAll('false', 'False').replaceAll('null', 'None');

export function openaiSnippet(origin, form, request) {
  const { model, stream, ...rest } = request.body;
  const args = Object.entries(rest).map(([k, v]) => `    ${k}=${py(v).replaceAll('\n', '\n    ')},`).join('\n');
  const call = form.mode === 'chat' ? 'client.chat.completions.create' : 'client.completions.create';
  const read = form.mode === 'chat'
    ? (stream ? 'for chunk in answer:\n    print(chunk.choices[0].delta.content or "", end="", flush=True)' : 'print(answer.choices[0].message.content)')
    : (stream ? 'for chunk in answer:\n    print(chunk.choices[0].text, end="", flush=True)' : 'print(answer.choices[0].text)');
  return `import os\nfrom openai import OpenAI\n\nclient = OpenAI(base_url="${origin}/v1", api_key=os.environ["PIER_API_KEY"])\nanswer = ${call}(\n    model="${model}",\n${args}\n    stream=${stream ? 'True' : 'False'},\n)\n${read}`;
}

// boto3 against the gateway: the TGI payload as built, or for OpenAI modes the same prompt as a TGI payload (chat
// as the Messages API, which /invocations also takes).
export function boto3Snippet(origin, form, request) {
  const { endpoint, component } = form.target;
  let body = request.body;
  if (form.mode === 'chat') body = { messages: request.body.messages, max_tokens: request.body.max_tokens };
  if (form.mode === 'completion') body = { inputs: request.body.prompt, parameters: { max_new_tokens: request.body.max_tokens } };
  const streaming = form.stream;
  const args = [
    `    EndpointName="${endpoint}",`,
    ...(component ? [`    InferenceComponentName="${component}",`] : []),
    '    ContentType="application/json",',
    `    Body=json.dumps(${py(body).replaceAll('\n', '\n    ')}),`,
  ].join('\n');
  const read = streaming
    ? 'for event in answer["Body"]:\n    print(event["PayloadPart"]["Bytes"].decode(), end="", flush=True)'
    : 'print(answer["Body"].read().decode())';
  const call = streaming ? 'invoke_endpoint_with_response_stream' : 'invoke_endpoint';
  return `import json\nimport boto3\n\n# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: a pier key (pier keys create)\nruntime = boto3.client("sagemaker-runtime", endpoint_url="${origin}", region_name="us-east-1")\nanswer = runtime.${call}(\n${args}\n)\n${read}`;
}
