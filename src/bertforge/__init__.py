"""bertforge: BERT pre-training from scratch (masked LM + next sentence prediction)."""

from .config import ModelConfig, TrainConfig
from .errors import UserError
from .inference import Bert, load
from .model import BertForPreTraining, BertForSequenceClassification, BertModel

__all__ = ["Bert", "BertForPreTraining", "BertForSequenceClassification", "BertModel", "ModelConfig", "TrainConfig", "UserError", "load"]
__version__ = "0.1.0"
