module github.com/tenure-dev/tenure/cmd

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/hashicorp/consul/api v1.25.1
	github.com/jackc/pgx/v5 v5.13.0
	github.com/nats-io/nats.go v1.55.0
	github.com/prometheus/client_golang v1.23.2
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stretchr/testify v1.12.1
	github.com/tenure-dev/tenure v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/fence/mysqlfence v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/fence/pgfence v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/fence/redisfence v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/internal/testserver/consulserver v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/internal/testserver/etcdserver v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/internal/testserver/kubeserver v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/internal/testserver/mysqlserver v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/internal/testserver/natsserver v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/internal/testserver/pgserver v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/internal/testserver/redisserver v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/internal/testserver/sqliteserver v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/metrics v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/registry v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/consulstore v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/etcdstore v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/k8sstore v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/mysqlstore v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/natsstore v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/pgstore v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/redisstore v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/sqlitestore v0.0.0-00010101000000-000000000000
	go.etcd.io/etcd/client/v3 v3.7.3
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.27.1
	golang.org/x/sys v0.49.0
	k8s.io/api v0.37.2
	k8s.io/apimachinery v0.37.2
	k8s.io/client-go v0.37.2
	sigs.k8s.io/yaml v1.6.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/armon/go-metrics v0.4.1 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/emicklei/go-restful/v3 v3.13.0 // indirect
	github.com/fatih/color v1.14.1 // indirect
	github.com/fxamacker/cbor/v2 v2.9.1 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-openapi/jsonpointer v1.0.0 // indirect
	github.com/go-openapi/jsonreference v1.0.0 // indirect
	github.com/go-openapi/swag v0.27.1 // indirect
	github.com/go-openapi/swag/cmdutils v0.27.1 // indirect
	github.com/go-openapi/swag/conv v0.27.1 // indirect
	github.com/go-openapi/swag/fileutils v0.27.1 // indirect
	github.com/go-openapi/swag/jsonutils v0.27.1 // indirect
	github.com/go-openapi/swag/loading v0.27.1 // indirect
	github.com/go-openapi/swag/mangling v0.27.1 // indirect
	github.com/go-openapi/swag/netutils v0.27.1 // indirect
	github.com/go-openapi/swag/pools v0.27.1 // indirect
	github.com/go-openapi/swag/stringutils v0.27.1 // indirect
	github.com/go-openapi/swag/typeutils v0.27.1 // indirect
	github.com/go-openapi/swag/yamlutils v0.27.1 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/gnostic-models v0.7.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.29.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/hashicorp/go-hclog v1.5.0 // indirect
	github.com/hashicorp/go-immutable-radix v1.3.1 // indirect
	github.com/hashicorp/go-rootcerts v1.0.2 // indirect
	github.com/hashicorp/golang-lru v0.5.4 // indirect
	github.com/hashicorp/serf v0.10.1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/mattn/go-colorable v0.1.13 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/mitchellh/go-homedir v1.1.0 // indirect
	github.com/mitchellh/mapstructure v1.5.0 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.67.5 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/tenure-dev/tenure/internal/pgkit v0.0.0-00010101000000-000000000000 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.etcd.io/etcd/api/v3 v3.7.3 // indirect
	go.etcd.io/etcd/client/pkg/v3 v3.7.3 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/exp v0.0.0-20230321023759-10a507213a29 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/term v0.47.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/grpc v1.83.2 // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
	gopkg.in/evanphx/json-patch.v4 v4.13.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/kube-openapi v0.0.0-20260721132016-d427ff9ee9ad // indirect
	k8s.io/utils v0.0.0-20260626114624-be93311217bd // indirect
	modernc.org/libc v1.80.1 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
	modernc.org/sqlite v1.62.0 // indirect
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.4.2 // indirect
)

// Every module of this repository, from this tree (scripts/modules writes this).
replace (
	github.com/tenure-dev/tenure => ..
	github.com/tenure-dev/tenure/fence/httpfence => ../fence/httpfence
	github.com/tenure-dev/tenure/fence/mysqlfence => ../fence/mysqlfence
	github.com/tenure-dev/tenure/fence/pgfence => ../fence/pgfence
	github.com/tenure-dev/tenure/fence/redisfence => ../fence/redisfence
	github.com/tenure-dev/tenure/fence/s3fence => ../fence/s3fence
	github.com/tenure-dev/tenure/internal/pgkit => ../internal/pgkit
	github.com/tenure-dev/tenure/internal/testserver/consulserver => ../internal/testserver/consulserver
	github.com/tenure-dev/tenure/internal/testserver/etcdserver => ../internal/testserver/etcdserver
	github.com/tenure-dev/tenure/internal/testserver/kubeserver => ../internal/testserver/kubeserver
	github.com/tenure-dev/tenure/internal/testserver/mysqlserver => ../internal/testserver/mysqlserver
	github.com/tenure-dev/tenure/internal/testserver/natsserver => ../internal/testserver/natsserver
	github.com/tenure-dev/tenure/internal/testserver/pgserver => ../internal/testserver/pgserver
	github.com/tenure-dev/tenure/internal/testserver/redisserver => ../internal/testserver/redisserver
	github.com/tenure-dev/tenure/internal/testserver/s3server => ../internal/testserver/s3server
	github.com/tenure-dev/tenure/internal/testserver/sqliteserver => ../internal/testserver/sqliteserver
	github.com/tenure-dev/tenure/metrics => ../metrics
	github.com/tenure-dev/tenure/pgadvisory => ../pgadvisory
	github.com/tenure-dev/tenure/registry => ../registry
	github.com/tenure-dev/tenure/store/consulstore => ../store/consulstore
	github.com/tenure-dev/tenure/store/etcdstore => ../store/etcdstore
	github.com/tenure-dev/tenure/store/k8sstore => ../store/k8sstore
	github.com/tenure-dev/tenure/store/mysqlstore => ../store/mysqlstore
	github.com/tenure-dev/tenure/store/natsstore => ../store/natsstore
	github.com/tenure-dev/tenure/store/pgstore => ../store/pgstore
	github.com/tenure-dev/tenure/store/redisstore => ../store/redisstore
	github.com/tenure-dev/tenure/store/sqlitestore => ../store/sqlitestore
)
