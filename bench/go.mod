module github.com/tenure-dev/tenure/bench

go 1.26.0

require (
	cirello.io/pglock v1.16.2
	github.com/bsm/redislock v0.9.4
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/hashicorp/consul/api v1.25.1
	github.com/jackc/pgx/v5 v5.13.0
	github.com/lib/pq v1.12.3
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stretchr/testify v1.12.1
	github.com/tenure-dev/tenure v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/internal/testserver/consulserver v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/internal/testserver/etcdserver v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/internal/testserver/redisserver v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/consulstore v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/etcdstore v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/pgstore v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/redisstore v0.0.0-00010101000000-000000000000
	github.com/tenure-dev/tenure/store/sqlitestore v0.0.0-00010101000000-000000000000
	go.etcd.io/etcd/client/v3 v3.7.3
	go.uber.org/zap v1.27.1
	google.golang.org/grpc v1.83.2
)

require (
	github.com/armon/go-metrics v0.4.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/fatih/color v1.14.1 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
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
	github.com/mattn/go-colorable v0.1.13 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/mitchellh/go-homedir v1.1.0 // indirect
	github.com/mitchellh/mapstructure v1.5.0 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/tenure-dev/tenure/internal/pgkit v0.0.0-00010101000000-000000000000 // indirect
	go.etcd.io/etcd/api/v3 v3.7.3 // indirect
	go.etcd.io/etcd/client/pkg/v3 v3.7.3 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/exp v0.0.0-20230321023759-10a507213a29 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
	modernc.org/libc v1.80.1 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
	modernc.org/sqlite v1.62.0 // indirect
)

// Every module of this repository, from this tree (scripts/modules writes this).
replace (
	github.com/tenure-dev/tenure => ..
	github.com/tenure-dev/tenure/cmd => ../cmd
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
