// Scaling activities, when the gateway serves Application Auto Scaling (JSON 1.1 at its own address, X-Amz-Target
// AnyScaleFrontendService.*, as AWS names it). A gateway without it answers an error, and the console shows no
// panel: this is the one place that knows the API.
import { authHeaders } from './api.js';

// Application Auto Scaling's resource id of a workload: an inference component, or a classic endpoint's variant.
export function resourceId(workload) {
  const [endpoint, variant] = workload.split('/');
  return variant ? `endpoint/${endpoint}/variant/${variant}` : `inference-component/${workload}`;
}

export async function scalingActivities(workload) {
  try {
    const response = await fetch('/', {
      method: 'POST',
      headers: authHeaders({ 'X-Amz-Target': 'AnyScaleFrontendService.DescribeScalingActivities', 'Content-Type': 'application/x-amz-json-1.1' }),
      body: JSON.stringify({ ServiceNamespace: 'sagemaker', ResourceId: resourceId(workload), MaxResults: 20 }),
    });
    if (!response.ok) return null;
    return (await response.json()).ScalingActivities || [];
  } catch {
    return null;
  }
}
