-------------------------------- MODULE MCzombie --------------------------------
(***************************************************************************************)
(* Without controller-epoch fencing a zombie controller's decisions get through.  Two   *)
(* brokers, controller 1.  Broker 2 dies (a BrokerChange event is queued at 1); then 1's*)
(* store session expires (/controller and /brokers/ids/1 go); 2 restarts and is elected *)
(* controller in epoch 2; 1 has not yet taken its Reregister event (queued behind the   *)
(* BrokerChange) and, still acting in epoch 1, handles the broker change and writes the *)
(* partition node (ISR removal / election), which succeeds without the epoch check.     *)
(* Violates StaleControllerFenced (part 2: a deposed controller's write succeeds).      *)
(***************************************************************************************)
EXTENDS TruncationKIP320, KafkaInvariants

MC_Assignment == [p \in Partitions |-> <<1, 2>>]

ReproNext ==
    \/ CrashNext \/ ExpiryNext \/ ControllerNext \/ ControllerRequestsNext \/ MetadataNext
=============================================================================
