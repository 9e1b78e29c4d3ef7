package schema

// The API server's size limits. Each is the number in the Kubernetes (or
// etcd) source named beside it, so that the host refuses exactly where the
// cluster would.
const (
	// MaxDataBytes bounds a ConfigMap's data plus binaryData and a
	// Secret's data (stringData merged in): the sum of the values' lengths,
	// binary values decoded. k8s.io/api/core/v1.MaxSecretSize (1 MiB),
	// enforced by ValidateConfigMap and ValidateSecret in
	// k8s.io/kubernetes/pkg/apis/core/validation.
	MaxDataBytes = 1 << 20

	// MaxAnnotationBytes bounds an object's annotations: the sum of the
	// keys' and values' lengths. TotalAnnotationSizeLimitB in
	// k8s.io/apimachinery/pkg/api/validation (ValidateAnnotationsSize),
	// which holds for every kind, custom resources included.
	MaxAnnotationBytes = 256 << 10

	// MaxObjectBytes bounds a whole object: etcd refuses a write larger
	// than its --max-request-bytes, 1.5 MiB by default
	// (DefaultMaxRequestBytes in go.etcd.io/etcd/server/v3/embed), with
	// "etcdserver: request is too large". The host measures the object as
	// the JSON it applies, without counting escapes: a lower bound of the
	// custom resource etcd stores (JSON, plus managedFields), so the host
	// never refuses what would fit. Built-in kinds are stored as protobuf,
	// a little smaller than their JSON; for ConfigMap and Secret
	// MaxDataBytes comes first.
	MaxObjectBytes = 3 << 19 // 1.5 MiB
)
