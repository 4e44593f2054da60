---- MODULE MCstaleepochfixed ----
(* The model of MCstaleepoch.tla under the configuration MCstaleepochfixed.cfg (see its header). *)
EXTENDS MCstaleepoch
====
