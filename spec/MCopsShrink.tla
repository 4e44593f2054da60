---- MODULE MCopsShrink ----
(* The model of MCops.tla under the configuration MCopsShrink.cfg (see its header). *)
EXTENDS MCops
====
