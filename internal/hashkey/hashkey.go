// Package hashkey holds the per-installation key the config hash is keyed
// with (internal/digest). The key lives in one Secret in configward's own
// namespace, which configward creates when it is missing; the Helm chart
// does not template it, so `helm upgrade`, `helm template` (GitOps renders
// without cluster access) and restarts leave it as it is. Every process
// reads it from the API server (never through the digest-only cache) and
// polls for a replacement: deleting the Secret is how it is rotated, and
// the rollout controller then re-stamps every workload once, paced.
package hashkey

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DataKey is the key of the Secret's data that holds the key.
const DataKey = "key"

// keyBytes is the size of a new key: 256 bits, the strength of HMAC-SHA256.
const keyBytes = 32

// Key is one installation key.
type Key struct {
	bytes []byte
	// ID tells keys apart in logs and Events: the first 8 bytes of the
	// key's SHA-256, which reveals nothing of it.
	ID string
}

// Bytes returns the key for HMAC. Callers must not change or keep it
// beyond the computation.
func (k *Key) Bytes() []byte { return k.bytes }

func newKey(b []byte) *Key {
	sum := sha256.Sum256(b)
	return &Key{bytes: bytes.Clone(b), ID: hex.EncodeToString(sum[:8])}
}

// Source keeps the current key.
type Source struct {
	reader    client.Reader // the API server, not a cache
	writer    client.Client
	namespace string
	name      string
	interval  time.Duration
	log       logr.Logger

	key      atomic.Pointer[Key]
	mu       sync.Mutex
	onChange []func(*Key)
}

// New returns a Source for the Secret namespace/name. reader must read the
// API server directly (a manager's API reader): the managers' cache keeps
// Secrets as digests only.
func New(reader client.Reader, writer client.Client, namespace, name string, interval time.Duration, log logr.Logger) *Source {
	return &Source{reader: reader, writer: writer, namespace: namespace, name: name, interval: interval, log: log}
}

// Fixed returns a Source that always holds key: for tests and tools that
// compute hashes without a cluster.
func Fixed(key []byte) *Source {
	s := &Source{log: logr.Discard()}
	s.key.Store(newKey(key))
	return s
}

// Load reads the key, creating the Secret with a new random key when it
// does not exist. Concurrent creators (two webhook replicas and the
// controller starting at once) settle on whichever Secret the API server
// stored first.
func (s *Source) Load(ctx context.Context) error {
	k, err := s.read(ctx)
	if apierrors.IsNotFound(err) {
		k, err = s.create(ctx)
	}
	if err != nil {
		return fmt.Errorf("loading the config-hash key from Secret %s/%s: %w", s.namespace, s.name, err)
	}
	s.set(k)
	return nil
}

// Current returns the key in use; nil before Load.
func (s *Source) Current() *Key { return s.key.Load() }

// OnChange registers f, called with the new key after the key changes.
func (s *Source) OnChange(f func(*Key)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = append(s.onChange, f)
}

// Start polls the Secret until ctx ends, so that a rotated (deleted and
// re-created, or replaced) key is taken up by every process. It implements
// a controller-runtime Runnable; it runs on every replica.
func (s *Source) Start(ctx context.Context) error {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := s.Load(ctx); err != nil {
			s.log.Error(err, "keeping the old config-hash key")
		}
	}
}

// NeedLeaderElection is false: every replica needs the key.
func (s *Source) NeedLeaderElection() bool { return false }

func (s *Source) set(k *Key) {
	old := s.key.Swap(k)
	if old == nil || old.ID == k.ID {
		return
	}
	s.log.Info("the config-hash key changed; stale hashes are re-stamped", "from", old.ID, "to", k.ID)
	s.mu.Lock()
	fs := append([]func(*Key){}, s.onChange...)
	s.mu.Unlock()
	for _, f := range fs {
		f(k)
	}
}

func (s *Source) read(ctx context.Context) (*Key, error) {
	var secret corev1.Secret
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.name}, &secret); err != nil {
		return nil, err
	}
	b := secret.Data[DataKey]
	if len(b) < keyBytes {
		return nil, fmt.Errorf("data[%q] holds %d bytes; a key has at least %d: delete the Secret and configward creates a new key (every workload is re-stamped once)", DataKey, len(b), keyBytes)
	}
	return newKey(b), nil
}

func (s *Source) create(ctx context.Context) (*Key, error) {
	b := make([]byte, keyBytes)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "configward"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{DataKey: b},
	}
	err := s.writer.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		return s.read(ctx)
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("created the config-hash key", "secret", s.namespace+"/"+s.name)
	return newKey(b), nil
}
