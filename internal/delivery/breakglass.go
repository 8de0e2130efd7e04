package delivery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// BreakGlass is what a delivery of content, of config whose annotations
// are these, takes of a break-glass write: its reason, when
//
//   - the namespace is governed by change control, which records every
//     new reason with who set it (elsewhere nobody records who set one,
//     and approvals would be anyone's to skip);
//   - the reason is sealed to this very content (BreakGlassSeal): the
//     admission webhook seals a reason to the content of the write that
//     sets it, so a reason applies to that write only, never to a later
//     write that leaves it on the object, nor to one added without a
//     change, nor to one left from before delivery was turned on (whatever
//     is done to the records afterwards);
//   - and it is new since latest (the config's latest record, nil for
//     none), which already delivered it otherwise.
//
// key is the installation's hash key, content the snapshot name of the
// content the delivery takes everyone to.
func BreakGlass(annotations map[string]string, latest *v1alpha1.ConfigDelivery, governed bool, key []byte, content string) *v1alpha1.BreakGlassDelivery {
	reason := strings.TrimSpace(annotations[v1alpha1.BreakGlassAnnotation])
	if !governed || reason == "" || (latest != nil && latest.Annotations[v1alpha1.BreakGlassSeenAnnotation] == reason) {
		return nil
	}
	immediate := annotations[v1alpha1.BreakGlassDeliveryAnnotation] == v1alpha1.BreakGlassImmediate
	if !hmac.Equal([]byte(annotations[v1alpha1.BreakGlassSealAnnotation]), []byte(BreakGlassSeal(key, content, reason, immediate))) {
		return nil
	}
	return &v1alpha1.BreakGlassDelivery{Reason: reason, Immediate: immediate}
}

// BreakGlassSeal binds a break-glass reason, and whether it asks for an
// immediate delivery, to one content of one config (its snapshot name,
// which names the config and is keyed already). It is keyed with the
// installation's hash key, so nobody without it can seal a reason to a
// content of their choosing, and a seal copied from another write or
// another config does not fit.
func BreakGlassSeal(key []byte, content, reason string, immediate bool) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("configward break-glass seal\x00" + content + "\x00" + reason + "\x00"))
	if immediate {
		m.Write([]byte(v1alpha1.BreakGlassImmediate))
	}
	return "v1:" + hex.EncodeToString(m.Sum(nil))
}
