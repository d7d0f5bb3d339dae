"""The biLM's MLflow model as code ("models from code"): MLflow logs this file, not a pickle.

``mlflow.pyfunc.load_model`` runs this file in the loading process, which builds
:class:`ctxrep.models.elmo_pyfunc.ElmoPyfunc` by name: loading a registered ``ctxrep-bilm``
unpickles nothing (a ``python_model.pkl`` would run whatever code it holds). It needs ``ctxrep``
installed, as loading always did.
"""

from mlflow.models import set_model

from ctxrep.models.elmo_pyfunc import ElmoPyfunc

set_model(ElmoPyfunc())
