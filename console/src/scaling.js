// Scaling activities, once the gateway serves an autoscaling API. The hook: Application Auto Scaling's
// DescribeScalingActivities (JSON 1.1, X-Amz-Target AnyScaleFrontendService.*) for a component's copy count, as
// SageMaker's own autoscaling names it. A gateway without it answers an error, and the console shows no panel.
import { authHeaders } from './api.js';

export async function scalingActivities(component) {
  try {
    const response = await fetch('/', {
      method: 'POST',
      headers: authHeaders({ 'X-Amz-Target': 'AnyScaleFrontendService.DescribeScalingActivities', 'Content-Type': 'application/x-amz-json-1.1' }),
      body: JSON.stringify({ ServiceNamespace: 'sagemaker', ResourceId: `inference-component/${component}`, MaxResults: 20 }),
    });
    if (!response.ok) return null;
    return (await response.json()).ScalingActivities || [];
  } catch {
    return null;
  }
}
