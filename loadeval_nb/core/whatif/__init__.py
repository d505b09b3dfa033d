"""What other loader settings would buy: the DataLoader worker/queue model
(``simulator``), its predictions over a range of settings (``predict``) and the model
fed from a measured pair (``from_runs``)."""
