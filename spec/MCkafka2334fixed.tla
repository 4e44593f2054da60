---- MODULE MCkafka2334fixed ----
(* The model of MCkafka2334.tla under the configuration MCkafka2334fixed.cfg (see its header). *)
EXTENDS MCkafka2334
====
