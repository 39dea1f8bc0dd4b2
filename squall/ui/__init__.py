"""squall.ui: the web page, REST API and Prometheus metrics of running topologies."""
