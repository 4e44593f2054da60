---- MODULE MCzombiefixed ----
(* The model of MCzombie.tla under the configuration MCzombiefixed.cfg (see its header). *)
EXTENDS MCzombie
====
