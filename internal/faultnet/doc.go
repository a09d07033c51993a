// Package faultnet is a loopback TCP proxy that injects network faults at
// the socket, for tests and the chaos harness: point a client at
// [Proxy.Addr] instead of its server, then cut, black-hole, refuse or delay
// its connections, or lose the replies to what they send, while real
// processes talk through it.
//
//	p, err := faultnet.Listen("127.0.0.1:5432")
//	if err != nil {
//		return err
//	}
//	defer p.Close()
//	// connect the client to p.Addr() ... then:
//	p.BlackHole() // connections stay open, nothing gets through
//	p.Restore()   // held bytes flow again, in order
//
// # Faults
//
//   - [Proxy.BlackHole]: a partition. Connections, old and new, stay open
//     but no byte is forwarded in either direction; what was sent waits in
//     the proxy and the kernel's buffers and arrives, in order, after
//     [Proxy.Restore], as TCP delivers retransmitted data after a
//     partition heals. A client sees its calls hang until its own
//     deadlines.
//   - [Proxy.Cut]: every open connection is closed at once, in both
//     directions; new connections are forwarded as before (a server or
//     middlebox dropping its connections).
//   - [Proxy.Refuse]: new connections are accepted and closed at once (a
//     server that is down); open ones are left alone. Combine with Cut for
//     a crash.
//   - [Proxy.LoseReplies]: every open connection loses the next bytes its
//     server sends and is then closed; the request they answer was carried
//     out (a commit whose acknowledgement the network lost). The client
//     sees its call fail with a closed connection and cannot tell whether
//     it took effect. For a request-reply protocol (PostgreSQL, Redis,
//     HTTP/1.1 of Consul) the next bytes are the reply to the next request;
//     on a multiplexed one (etcd's gRPC over HTTP/2) they are the next
//     frames, whichever request they answer.
//   - [Proxy.SetDelay]: every chunk of bytes is held for the given time
//     before it is forwarded (latency).
//
// [Proxy.Restore] ends BlackHole and Refuse; the delay stays until set to
// zero. [Proxy.Close] stops the proxy, closes every connection and returns
// once every goroutine it started has exited.
package faultnet
