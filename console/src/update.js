// An endpoint's blue/green update as the console shows and starts it: where it stands, from DescribeEndpoint (the
// fields `pier deploy` reads too: PendingDeploymentSummary, LastDeploymentConfig, FailureReason), and the
// UpdateEndpoint request for a policy chosen on the page. Pure.

const STEPPED = { CANARY: 'canary', LINEAR: 'linear' };

// Where an update stands, or null when none runs and none just rolled back:
// {phase, config, moved (0..1 of the traffic on the new fleet), detail (the gateway's words), reason}.
// phase: provisioning (the new fleet starts), canary / linear (part of the traffic moved, baking), shifted (all of
// it moved, baking before the old fleet goes), rolled back (InService on the old config; FailureReason says why),
// rollback failed (UpdateRollbackFailed).
export function updateProgress(described) {
  const status = described.EndpointStatus;
  const reason = described.FailureReason || '';
  const pending = described.PendingDeploymentSummary;
  if (!pending) {
    if (status === 'UpdateRollbackFailed') return { phase: 'rollback failed', config: null, moved: 0, detail: '', reason };
    if (status === 'InService' && reason) return { phase: 'rolled back', config: null, moved: 0, detail: '', reason };
    return null;
  }
  const variants = pending.ProductionVariants || [];
  const wanted = variants.reduce((total, v) => total + (v.DesiredWeight || 0), 0);
  const moved = wanted > 0 ? variants.reduce((total, v) => total + (v.CurrentWeight || 0), 0) / wanted : 0;
  const statuses = variants.flatMap((v) => v.VariantStatus || []);
  const detail = [...new Set(statuses.map((s) => s.StatusMessage).filter(Boolean))].sort().join(', ');
  const routing = described.LastDeploymentConfig?.BlueGreenUpdatePolicy?.TrafficRoutingConfiguration?.Type;
  let phase;
  if (statuses.some((s) => s.Status === 'Creating') || moved <= 0) phase = 'provisioning';
  else if (moved < 1) phase = STEPPED[routing] || 'baking';
  else phase = 'shifted';
  return { phase, config: pending.EndpointConfigName, moved, detail, reason };
}

// UpdateEndpoint's body: `policy` is {type: ALL_AT_ONCE | CANARY | LINEAR, percent (the canary's size or each
// linear step, of the capacity), waitS (between steps), alarms (names, comma- or space-separated)}.
export function updateRequest(endpoint, config, policy = {}) {
  const body = { EndpointName: endpoint, EndpointConfigName: config };
  const type = policy.type || 'ALL_AT_ONCE';
  const alarms = String(policy.alarms || '').split(/[\s,]+/).filter(Boolean);
  if (type === 'ALL_AT_ONCE' && alarms.length === 0) return body; // SageMaker's default: all at once once healthy
  const routing = { Type: type, WaitIntervalInSeconds: Number(policy.waitS ?? 0) };
  const size = { Type: 'CAPACITY_PERCENT', Value: Number(policy.percent ?? 10) };
  if (type === 'CANARY') routing.CanarySize = size;
  if (type === 'LINEAR') routing.LinearStepSize = size;
  body.DeploymentConfig = { BlueGreenUpdatePolicy: { TrafficRoutingConfiguration: routing } };
  if (alarms.length) body.DeploymentConfig.AutoRollbackConfiguration = { Alarms: alarms.map((AlarmName) => ({ AlarmName })) };
  return body;
}
