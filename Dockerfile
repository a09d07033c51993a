# tenure's container image for those who build with Docker; it matches
# what tools/image writes without a daemon (scripts/release): scratch, the
# static binary at /usr/local/bin/tenure, /etc/passwd and /etc/group with
# the user nonroot (65532:65532) it runs as, /tmp, no shell.
#
#   docker build --build-arg VERSION=v0.1.0 -t tenure:v0.1.0 .
#
# The binary is stamped with VERSION only: the commit is not in the
# build context's reach (.git is not copied); scripts/release's binaries
# carry it.
FROM golang:1.26 AS build
ARG VERSION=devel
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags="-buildid= -s -w -X github.com/tenure-dev/tenure/cmd/tenure/internal/cli.stampedVersion=${VERSION}" \
      -o /out/usr/local/bin/tenure ./cmd/tenure \
 && mkdir -p /out/etc /out/home/nonroot /out/tmp \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >/out/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' >/out/etc/group \
 && chmod 1777 /out/tmp && chmod 700 /out/home/nonroot && chown 65532:65532 /out/home/nonroot

FROM scratch
COPY --from=build /out/ /
USER 65532:65532
WORKDIR /
ENV PATH=/usr/local/bin
ENTRYPOINT ["/usr/local/bin/tenure"]
CMD ["help"]
