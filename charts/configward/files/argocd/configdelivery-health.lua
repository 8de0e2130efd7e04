-- Argo CD health check of configward.dev/ConfigDelivery: put it under
-- resource.customizations.health.configward.dev_ConfigDelivery in
-- argocd-cm (the chart's README shows how). It says the delivery's state
-- the way Argo CD's health does: rolling or soaking is Progressing, waiting
-- for a person's `configward delivery promote` is Suspended, succeeded is
-- Healthy, and halted (rolled back or not), superseded or cancelled is
-- Degraded, as the record's Stalled condition says.
local hs = {}
if obj.status == nil or obj.status.state == nil or obj.status.state == "" then
  hs.status = "Progressing"
  hs.message = "configward's controller is placing the delivery's consumers into its waves"
  return hs
end
local st = obj.status
if obj.metadata.generation ~= nil and (st.observedGeneration == nil or st.observedGeneration < obj.metadata.generation) then
  hs.status = "Progressing"
  hs.message = "configward's controller has not acted on the last request yet"
  return hs
end
local wave = st.currentWave or ""
local message = st.message or ""
if st.state == "Succeeded" then
  hs.status = "Healthy"
  hs.message = "Delivered: every wave holds the new content"
elseif st.state == "WaitingForApproval" then
  hs.status = "Suspended"
  hs.message = "Wave " .. wave .. " waits for approval (configward delivery promote)"
elseif st.state == "Progressing" then
  hs.status = "Progressing"
  hs.message = "Wave " .. wave .. ": " .. message
elseif st.state == "Halted" then
  hs.status = "Degraded"
  local back = ""
  if st.rolledBack then
    back = ", rolled back"
  end
  hs.message = "Halted at wave " .. wave .. back .. " (" .. (st.reason or "") .. "): " .. message
else
  -- Superseded or Cancelled: this record will never deliver its content.
  hs.status = "Degraded"
  hs.message = st.state .. " (" .. (st.reason or "") .. "): " .. message
end
return hs
