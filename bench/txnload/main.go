// txnload: etcd alone under creates as platformd makes them, from a light client.
//
// bench_etcd.py --raw runs it beside its Python-thread client: Python threads spend
// much of the two cores themselves (grpcio, the GIL), so they understate what etcd
// alone does on this machine; this client spends little.  It speaks gRPC over HTTP/2
// without TLS with the standard library only (no module downloads): a Txn is
// Compare(CreateRevision == 0) then Put of a 400-byte value under a key of its own,
// encoded by hand, sent to the members in turn (as clientv3's round robin).
//
//	txnload URL[,URL...] IN_FLIGHT SECONDS
//
// prints "<Txn/s> <failed>".
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func varint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func bytesField(b []byte, number int, data []byte) []byte {
	b = varint(b, uint64(number<<3|2))
	b = varint(b, uint64(len(data)))
	return append(b, data...)
}

// txnFrame is a gRPC message frame of etcdserverpb.TxnRequest.
func txnFrame(key, value []byte) []byte {
	compare := []byte{0x10, 0x01} // target: CREATE (result EQUAL is the default)
	compare = bytesField(compare, 3, key)
	compare = append(compare, 0x28, 0x00) // create_revision: 0
	put := bytesField(bytesField(nil, 1, key), 2, value)
	request := bytesField(bytesField(nil, 1, compare), 2, bytesField(nil, 2, put))
	frame := make([]byte, 5, 5+len(request))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(request)))
	return append(frame, request...)
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: txnload URL[,URL...] IN_FLIGHT SECONDS")
		os.Exit(2)
	}
	urls := strings.Split(os.Args[1], ",")
	inFlight, _ := strconv.Atoi(os.Args[2])
	seconds, _ := strconv.Atoi(os.Args[3])
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	value := bytes.Repeat([]byte("x"), 400)
	var done, failed, turn atomic.Int64
	start := time.Now()
	stop := start.Add(time.Duration(seconds) * time.Second)
	var wg sync.WaitGroup
	for worker := 0; worker < inFlight; worker++ {
		wg.Add(1)
		go func(worker int) {
			defer wg.Done()
			for n := 0; time.Now().Before(stop); n++ {
				url := urls[turn.Add(1)%int64(len(urls))] + "/etcdserverpb.KV/Txn"
				key := []byte(fmt.Sprintf("/txnload/%d/%d/%d", start.UnixNano(), worker, n))
				request, _ := http.NewRequest("POST", url, bytes.NewReader(txnFrame(key, value)))
				request.Header.Set("content-type", "application/grpc")
				request.Header.Set("te", "trailers")
				response, err := client.Do(request)
				if err == nil {
					_, err = io.Copy(io.Discard, response.Body)
					response.Body.Close()
				}
				if err != nil || response.Trailer.Get("Grpc-Status") != "0" {
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		}(worker)
	}
	wg.Wait()
	fmt.Printf("%.1f %d\n", float64(done.Load())/time.Since(start).Seconds(), failed.Load())
}
