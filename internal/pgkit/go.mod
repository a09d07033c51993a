module github.com/tenure-dev/tenure/internal/pgkit

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.13.0
	github.com/stretchr/testify v1.12.1
	github.com/tenure-dev/tenure v0.0.0-00010101000000-000000000000
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/text v0.43.0 // indirect
)

// Every module of this repository, from this tree (scripts/modules writes this).
replace (
	github.com/tenure-dev/tenure => ../..
	github.com/tenure-dev/tenure/cmd => ../../cmd
	github.com/tenure-dev/tenure/fence/httpfence => ../../fence/httpfence
	github.com/tenure-dev/tenure/fence/mysqlfence => ../../fence/mysqlfence
	github.com/tenure-dev/tenure/fence/pgfence => ../../fence/pgfence
	github.com/tenure-dev/tenure/fence/redisfence => ../../fence/redisfence
	github.com/tenure-dev/tenure/fence/s3fence => ../../fence/s3fence
	github.com/tenure-dev/tenure/internal/testserver/consulserver => ../../internal/testserver/consulserver
	github.com/tenure-dev/tenure/internal/testserver/etcdserver => ../../internal/testserver/etcdserver
	github.com/tenure-dev/tenure/internal/testserver/kubeserver => ../../internal/testserver/kubeserver
	github.com/tenure-dev/tenure/internal/testserver/mysqlserver => ../../internal/testserver/mysqlserver
	github.com/tenure-dev/tenure/internal/testserver/natsserver => ../../internal/testserver/natsserver
	github.com/tenure-dev/tenure/internal/testserver/pgserver => ../../internal/testserver/pgserver
	github.com/tenure-dev/tenure/internal/testserver/redisserver => ../../internal/testserver/redisserver
	github.com/tenure-dev/tenure/internal/testserver/s3server => ../../internal/testserver/s3server
	github.com/tenure-dev/tenure/internal/testserver/sqliteserver => ../../internal/testserver/sqliteserver
	github.com/tenure-dev/tenure/metrics => ../../metrics
	github.com/tenure-dev/tenure/pgadvisory => ../../pgadvisory
	github.com/tenure-dev/tenure/registry => ../../registry
	github.com/tenure-dev/tenure/store/consulstore => ../../store/consulstore
	github.com/tenure-dev/tenure/store/etcdstore => ../../store/etcdstore
	github.com/tenure-dev/tenure/store/k8sstore => ../../store/k8sstore
	github.com/tenure-dev/tenure/store/mysqlstore => ../../store/mysqlstore
	github.com/tenure-dev/tenure/store/natsstore => ../../store/natsstore
	github.com/tenure-dev/tenure/store/pgstore => ../../store/pgstore
	github.com/tenure-dev/tenure/store/redisstore => ../../store/redisstore
	github.com/tenure-dev/tenure/store/sqlitestore => ../../store/sqlitestore
)
