-- Argo CD health check of configward.dev/ConfigSet: put it under
-- resource.customizations.health.configward.dev_ConfigSet in argocd-cm
-- (the chart's README shows how). A set is what a GitOps tool writes, and
-- its conditions say where its version stands: Healthy once delivered,
-- Suspended while a wave of its delivery waits for a person's
-- `configward delivery promote configset/NAME`, Degraded when it stopped
-- (timed out, a member claimed by another set, members that cannot be
-- delivered together, or its delivery halted or was cancelled), and
-- Progressing otherwise (waiting for members, delivering).
local hs = {}
local st = obj.status
if st == nil or st.conditions == nil or obj.metadata.generation == nil
    or st.observedGeneration == nil or st.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "configward's controller has not looked at this version yet"
  return hs
end
local function condition(kind)
  for _, c in ipairs(st.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end
local ready = condition("Ready")
local stalled = condition("Stalled")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message
elseif stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = (stalled.reason or "") .. ": " .. (stalled.message or "")
elseif ready ~= nil and ready.reason == "ApprovalRequired" then
  hs.status = "Suspended"
  hs.message = ready.message
else
  hs.status = "Progressing"
  if ready ~= nil then
    hs.message = (ready.reason or "") .. ": " .. (ready.message or "")
  else
    hs.message = "waiting for configward's controller"
  end
end
return hs
