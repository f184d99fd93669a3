module platformd/bench/txnload

go 1.24
